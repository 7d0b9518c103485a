"""The state-file format read back from the bytes its writers produce, and each defect named."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from sparkpoint.checkpoint import DistributionMode, KeyGroupRange
from sparkpoint.statefiles.keygroups import key_group_for_key
from sparkpoint.statefiles.reader import (
    StateFormatError,
    key_group_length,
    operator_element,
    parse_key_group,
)
from sparkpoint.statefiles.writers import GROUP_HEADER, KeyedStateWriter, OperatorStateWriter

MAX_PARALLELISM = 8


def one_group(keys: list[str]) -> tuple[bytes, int]:
    """The bytes of the key group of ``keys`` (they must share one), and that group."""
    groups = {key_group_for_key(key, MAX_PARALLELISM) for key in keys}
    assert len(groups) == 1
    group = groups.pop()
    out = io.BytesIO()
    writer = KeyedStateWriter(out, KeyGroupRange(group, group), MAX_PARALLELISM)
    writer.begin_key_group(group)
    for key in keys:
        writer.write(key, f"value of {key}".encode())
    (offset,) = writer.finish()
    return out.getvalue()[offset:], group


def test_a_written_key_group_reads_back_whole() -> None:
    data, group = one_group(["a"])
    assert key_group_length(data[: GROUP_HEADER.size]) == len(data)
    assert list(parse_key_group(data, group, MAX_PARALLELISM)) == [("a", b"value of a")]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(lambda data: data[:-1], "checksum mismatch", id="body-cut-short"),
        pytest.param(
            lambda data: data[: GROUP_HEADER.size - 1],
            "shorter than a group header",
            id="header-cut-short",
        ),
        pytest.param(
            lambda data: b"XXXX" + data[4:], "no key-group header at its offset", id="no-magic"
        ),
        pytest.param(
            lambda data: data[:-1] + bytes([data[-1] ^ 1]), "checksum mismatch", id="bit-flipped"
        ),
    ],
)
def test_damaged_bytes_are_refused_naming_the_defect(
    damage: Callable[[bytes], bytes], message: str
) -> None:
    data, group = one_group(["a"])
    with pytest.raises(StateFormatError, match=message):
        list(parse_key_group(damage(data), group))


def test_a_group_read_at_the_wrong_offset_says_which_group_it_found() -> None:
    data, group = one_group(["a"])
    with pytest.raises(StateFormatError, match=f"the offset points at key group {group}"):
        list(parse_key_group(data, group + 1))


def test_operator_elements_read_back_and_a_cut_stream_is_refused() -> None:
    out = io.BytesIO()
    writer = OperatorStateWriter(out)
    writer.add("offsets", DistributionMode.SPLIT_DISTRIBUTE, b"partition-0:17")
    writer.add("offsets", DistributionMode.SPLIT_DISTRIBUTE, b"partition-1:4")
    data = out.getvalue()
    first, second = writer.states()["offsets"].offsets
    assert operator_element(data, first, "offsets") == b"partition-0:17"
    assert operator_element(data, second, "offsets") == b"partition-1:4"
    with pytest.raises(StateFormatError, match=f"element of 'offsets' at {second} is truncated"):
        operator_element(data[:-1], second, "offsets")
    with pytest.raises(StateFormatError, match=f"at {len(data)} is beyond the end"):
        operator_element(data, len(data), "offsets")
