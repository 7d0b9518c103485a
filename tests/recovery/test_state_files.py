"""Keyed and operator state files: written, rescaled and read back through real files."""

from __future__ import annotations

import io
import pickle
import struct
from pathlib import Path

import pytest

from sparkpoint.checkpoint import (
    DistributionMode,
    FileStateHandle,
    JobGraph,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSpec,
)
from sparkpoint.recovery import StateFileError, plan_restore
from sparkpoint.recovery.reader import (
    read_keyed_state,
    read_operator_state,
    read_subtask_keyed_state,
)
from sparkpoint.statefiles import writers as statefile
from sparkpoint.statefiles.keygroups import key_group_for_key
from sparkpoint.statefiles.keys import canonical_key_bytes
from sparkpoint.statefiles.writers import KeyedStateWriter
from tests.recovery.support import (
    LocalFileOutput,
    LocalRangeReader,
    checkpoint_of,
    keyed_operator_state,
    list_operator_state,
    local_filesystem_for,
)

STATE = {
    **{f"user-{i}": pickle.dumps({"clicks": i, "last": f"page-{i % 7}"}) for i in range(3000)},
    **{i: pickle.dumps([i] * (i % 5)) for i in range(-500, 500)},
    **{("tenant", i, i % 2 == 0): pickle.dumps(i) for i in range(300)},
    None: b"",
    b"\x00raw": b"bytes key",
    2.5: b"float key",
}


@pytest.mark.parametrize("new_parallelism", [1, 2, 3, 7, 128])
def test_checkpoint_at_3_restores_at_any_parallelism(tmp_path: Path, new_parallelism: int) -> None:
    keyed = keyed_operator_state(
        "count", STATE, 128, 3, lambda name: LocalFileOutput(tmp_path / name)
    )
    assert all(
        isinstance(s.keyed[0].stream, FileStateHandle) for s in keyed.subtask_states.values()
    )
    plan = plan_restore(
        checkpoint_of(keyed),
        JobGraph("job", (OperatorSpec("count", new_parallelism, 128, keyed=True),)),
    )
    restored: dict[object, bytes] = {}
    for subtask in plan.operators["count"].subtasks:
        for key_group, key, value in read_subtask_keyed_state(
            subtask, local_filesystem_for, max_parallelism=128
        ):
            assert key_group in subtask.key_group_range
            assert key not in restored
            restored[key] = value
    assert restored == STATE
    assert pickle.loads(restored["user-42"]) == {"clicks": 42, "last": "page-0"}


class CountingReader(LocalRangeReader):
    """Local reads that also record what was read, to show a subtask reads only its share."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.calls = 0

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        self.calls += 1
        self.bytes_read += length
        return super().read_range(path, offset, length)


def test_a_subtask_reads_only_its_key_groups(tmp_path: Path) -> None:
    big = {f"k{i}": bytes(200) for i in range(4000)}
    keyed = keyed_operator_state("count", big, 128, 1, lambda n: LocalFileOutput(tmp_path / n))
    total = keyed.subtask_states[0].keyed[0].stream.size
    plan = plan_restore(checkpoint_of(keyed), JobGraph("job", (OperatorSpec("count", 8, 128),)))
    counting = CountingReader()
    share = list(read_subtask_keyed_state(plan.subtask("count", 5), lambda _: counting))
    assert len(share) == sum(1 for k in big if key_group_for_key(k, 128) in range(80, 96))
    # 1/8 of the key groups: about 1/8 of the bytes (plus one group header), in 2 reads.
    assert counting.bytes_read < total / 8 * 1.3
    assert counting.calls == 2


def _one_file(tmp_path: Path) -> KeyGroupsStateHandle:
    keyed = keyed_operator_state(
        "count",
        {f"k{i}": b"v" * i for i in range(50)},
        8,
        1,
        lambda n: LocalFileOutput(tmp_path / n),
    )
    return keyed.subtask_states[0].keyed[0]


def _read_all(handle: KeyGroupsStateHandle) -> list[object]:
    return list(read_keyed_state([handle], local_filesystem_for, max_parallelism=8))


def test_a_flipped_byte_is_a_checksum_error_naming_the_file(tmp_path: Path) -> None:
    handle = _one_file(tmp_path)
    path = Path(handle.stream.path)  # type: ignore[union-attr]
    data = bytearray(path.read_bytes())
    data[handle.offsets[3] + statefile.GROUP_HEADER.size + 2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(StateFileError, match=rf"{path}, key group 3: checksum mismatch"):
        _read_all(handle)


def test_a_truncated_file_is_a_short_read(tmp_path: Path) -> None:
    handle = _one_file(tmp_path)
    path = Path(handle.stream.path)  # type: ignore[union-attr]
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(StateFileError, match=r"short read .* the file is truncated"):
        _read_all(handle)


def test_an_offset_that_points_elsewhere_is_caught(tmp_path: Path) -> None:
    handle = _one_file(tmp_path)
    # Offsets shifted by one group: key group 2's offset is key group 1's header.
    shifted = KeyGroupsStateHandle(KeyGroupRange(2, 7), handle.offsets[1:7], handle.stream)
    with pytest.raises(StateFileError, match="key group 2: the offset points at key group 1"):
        _read_all(shifted)
    into_header = (handle.offsets[2] + 5, *handle.offsets[3:])  # 5 bytes into group 2
    wrong = KeyGroupsStateHandle(KeyGroupRange(2, 7), into_header, handle.stream)
    with pytest.raises(StateFileError, match="key group 2: no key-group header at its offset"):
        _read_all(wrong)
    offsets = list(handle.offsets)
    offsets[2] = offsets[1]  # group 1 has no bytes at all
    wrong = KeyGroupsStateHandle(handle.key_group_range, tuple(offsets), handle.stream)
    with pytest.raises(StateFileError, match="key group 1: shorter than a group header"):
        _read_all(wrong)


def test_an_unreadable_file_names_it(tmp_path: Path) -> None:
    handle = _one_file(tmp_path)
    Path(handle.stream.path).unlink()  # type: ignore[union-attr]
    with pytest.raises(StateFileError, match="cannot read state"):
        _read_all(handle)


def test_a_key_in_the_wrong_group_is_caught_on_read() -> None:
    # Written by hand with a max parallelism of 4, read as if it were 8: keys hash elsewhere.
    out = io.BytesIO()
    writer = KeyedStateWriter(out, KeyGroupRange(0, 3), 4)
    for key_group in range(4):
        writer.begin_key_group(key_group)
        for i in range(40):
            if key_group_for_key(i, 4) == key_group:
                writer.write(i, b"x")
    from sparkpoint.checkpoint import InlineStateHandle

    handle = KeyGroupsStateHandle(
        KeyGroupRange(0, 3), writer.finish(), InlineStateHandle("s", out.getvalue())
    )
    assert len(list(read_keyed_state([handle], max_parallelism=4))) == 40
    with pytest.raises(StateFileError, match="holds a key of key group"):
        list(read_keyed_state([handle], max_parallelism=8))


def test_the_writer_refuses_misuse() -> None:
    writer = KeyedStateWriter(io.BytesIO(), KeyGroupRange(2, 5), 8)
    with pytest.raises(ValueError, match="call begin_key_group"):
        writer.write("a", b"")
    with pytest.raises(ValueError, match=r"key group 1 is not in \[2, 5\]"):
        writer.begin_key_group(1)
    writer.begin_key_group(4)
    with pytest.raises(ValueError, match="not increasing"):
        writer.begin_key_group(3)
    wrong = next(k for k in range(100) if key_group_for_key(k, 8) != 4)
    with pytest.raises(ValueError, match=r"key belongs to key group \d, not 4"):
        writer.write(wrong, b"")
    with pytest.raises(ValueError, match="beyond max parallelism"):
        KeyedStateWriter(io.BytesIO(), KeyGroupRange(0, 8), 8)


def test_file_layout_matches_the_spec() -> None:
    out = io.BytesIO()
    writer = KeyedStateWriter(out, KeyGroupRange(0, 1), 2)
    key = next(k for k in range(100) if key_group_for_key(k, 2) == 1)
    writer.begin_key_group(1)
    writer.write(key, b"value")
    offsets = writer.finish()
    data = out.getvalue()
    assert data[:13] == b"SPKS\x01" + struct.pack(">II", 0, 2)
    assert offsets == (13, 13 + 24)
    assert data[13:37] == b"SPKG" + struct.pack(">IIQI", 0, 0, 0, 0)
    key_bytes = canonical_key_bytes(key)
    body = key_bytes + struct.pack(">I", 5) + b"value"
    import zlib

    assert data[37:61] == b"SPKG" + struct.pack(">IIQI", 1, 1, len(body), zlib.crc32(body))
    assert data[61:] == body


def test_operator_state_round_trips_through_files(tmp_path: Path) -> None:
    split, union = DistributionMode.SPLIT_DISTRIBUTE, DistributionMode.UNION
    elements = {
        i: {
            "offsets": (split, [f"p{i}-{j}".encode() for j in range(i + 2)]),
            "seen": (union, [str(i).encode()]),
        }
        for i in range(3)
    }
    state = list_operator_state("src", elements, 128, 3, lambda n: LocalFileOutput(tmp_path / n))
    plan = plan_restore(checkpoint_of(state), JobGraph("job", (OperatorSpec("src", 2, 128),)))
    parts = [
        read_operator_state(s.operator, local_filesystem_for)
        for s in plan.operators["src"].subtasks
    ]
    assert sorted(e for p in parts for e in p["offsets"]) == sorted(
        e for s in elements.values() for e in s["offsets"][1]
    )
    assert [len(p["offsets"]) for p in parts] == [5, 4]
    assert all(sorted(p["seen"]) == [b"0", b"1", b"2"] for p in parts)


def test_operator_state_plans_pickle(tmp_path: Path) -> None:
    union = DistributionMode.UNION
    state = list_operator_state(
        "src",
        {0: {"seen": (union, [b"a"])}, 1: {"seen": (union, [b"b"])}},
        128,
        2,
        lambda n: LocalFileOutput(tmp_path / n),
    )
    plan = plan_restore(checkpoint_of(state), JobGraph("job", (OperatorSpec("src", 3, 128),)))
    subtask = pickle.loads(pickle.dumps(plan.subtask("src", 2)))
    assert subtask == plan.subtask("src", 2)
    assert sorted(read_operator_state(subtask.operator, local_filesystem_for)["seen"]) == [
        b"a",
        b"b",
    ]


def test_one_key_twice_is_refused() -> None:
    from tests.recovery.support import InlineOutput

    with pytest.raises(ValueError, match="given twice"):
        statefile.write_keyed_state(
            InlineOutput("x"), [(0.0, b"a"), (-0.0, b"b")], KeyGroupRange(0, 127), 128
        )
