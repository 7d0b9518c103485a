"""A checkpoint's two sizes, as Flink tells them apart: the checkpointed size (the bytes it
wrote: its own files and the shared files new in it) and the full size (everything it
references). Computed from real incremental handles of a RocksDB store, and carried
through `_metadata`, the acknowledgement's JSON and the plain-data view."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    DistributionMode,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InvalidCheckpointValue,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
    serde,
)
from sparkpoint.metadata import decode_metadata, describe_checkpoint, encode_metadata
from tests.metadata.cases import GOLDEN_DIR
from tests.support.incremental import two_snapshots

LOW, HIGH = KeyGroupRange(0, 63), KeyGroupRange(64, 127)


def test_checkpointed_size_is_what_the_snapshot_uploaded(tmp_path: Path) -> None:
    first, second = two_snapshots(tmp_path, LOW)
    # The first snapshot has no base: it wrote everything it references.
    assert not first.handle.reused
    assert first.handle.checkpointed_size == first.handle.state_size == first.written
    # The second references most of the first one's SST files and wrote the rest.
    handle = second.handle
    earlier = {f.name: f.stream for f in first.handle.shared}
    assert handle.reused == {f.name for f in handle.shared if earlier.get(f.name) == f.stream}
    assert handle.reused, "one changed key leaves most SST files as they were"
    assert handle.checkpointed_size == second.written
    assert handle.state_size == sum(f.stream.size for f in (*handle.shared, *handle.private))
    assert handle.reused_size == sum(earlier[name].size for name in handle.reused)
    assert handle.checkpointed_size * 20 < handle.state_size
    # A handle cut for a rescaled restore still says which files were reused.
    part = handle.intersection(KeyGroupRange(0, 9))
    assert part is not None and part.reused == handle.reused


def test_the_sizes_add_up_and_survive_metadata_json_and_description(tmp_path: Path) -> None:
    (_, low), (_, high) = two_snapshots(tmp_path, LOW), two_snapshots(tmp_path, HIGH, index=1)
    offsets = OperatorStateHandle(
        {"offsets": StateMetaInfo((0,), DistributionMode.SPLIT_DISTRIBUTE)},
        FileStateHandle(str(tmp_path / "source-0-0"), 300),
    )
    in_memory = KeyGroupsStateHandle(
        KeyGroupRange(0, 1), (0, 40), FileStateHandle(str(tmp_path / "other-0-0"), 100)
    )
    checkpoint = CompletedCheckpoint(
        "job", 2, CheckpointKind.CHECKPOINT, 1_000, 1_200,
        {
            "count": OperatorState(
                "count", 2, 128,
                {
                    0: OperatorSubtaskState(keyed=(low.handle,), operator=(offsets,)),
                    1: OperatorSubtaskState(keyed=(high.handle,)),
                },
            ),
            "other": OperatorState("other", 1, 2, {0: OperatorSubtaskState(keyed=(in_memory,))}),
        },
    )  # fmt: skip
    count, other = checkpoint.operator_states["count"], checkpoint.operator_states["other"]
    subtask = count.subtask_states[0]
    assert subtask.state_size == low.handle.state_size + 300
    assert subtask.checkpointed_size == low.written + 300
    assert count.checkpointed_size == low.written + 300 + high.written
    # State that is not incremental is written whole by every checkpoint.
    assert other.checkpointed_size == other.state_size == 100
    assert checkpoint.checkpointed_size == count.checkpointed_size + 100
    assert checkpoint.state_size == count.state_size + 100
    assert checkpoint.checkpointed_size < checkpoint.state_size

    decoded = decode_metadata(encode_metadata(checkpoint), source="_metadata")
    assert decoded == checkpoint
    assert decoded.checkpointed_size == checkpoint.checkpointed_size
    sent = serde.keyed_from_dict(serde.keyed_to_dict(low.handle))
    assert sent == low.handle and sent.checkpointed_size == low.written

    described = describe_checkpoint(decoded)
    assert (described["state_size"], described["checkpointed_size"]) == (
        checkpoint.state_size,
        checkpoint.checkpointed_size,
    )
    (count_view, other_view) = described["operators"]
    assert [s["checkpointed_size"] for s in count_view["subtasks"]] == [
        low.written + 300,
        high.written,
    ]
    assert other_view["checkpointed_size"] == other_view["state_size"] == 100
    shared = count_view["subtasks"][0]["keyed"][0]["shared"]
    assert {f["name"] for f in shared if f["reused"]} == low.handle.reused


def test_a_version_2_file_counts_every_shared_file_as_written() -> None:
    # Version 2 did not record who uploaded a shared file: its checkpointed size is its
    # full size (an upper bound), never a guess below it.
    path = GOLDEN_DIR / "v2" / "incremental.metadata"
    old = decode_metadata(path.read_bytes(), source=str(path))
    assert old.checkpointed_size == old.state_size
    path = GOLDEN_DIR / "v3" / "incremental-reused.metadata"
    new = decode_metadata(path.read_bytes(), source=str(path))
    reused = 2 * 4096 * 9  # 000009.sst of each of the two stores
    assert new.checkpointed_size == new.state_size - reused


def test_a_reused_file_must_be_one_of_the_handles_shared_files() -> None:
    with pytest.raises(InvalidCheckpointValue, match="reused files"):
        IncrementalKeyedStateHandle(LOW, LOW, "i", (), (), frozenset({"000009.sst"}))
