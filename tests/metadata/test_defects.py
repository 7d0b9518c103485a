"""Broken `_metadata` files give a MetadataError naming the file and the defect."""

from __future__ import annotations

import json
import re
import zlib

import pytest

from sparkpoint.checkpoint import CheckpointKind, InlineStateHandle, OperatorSubtaskState
from sparkpoint.metadata import MetadataError, decode_metadata, encode_metadata, envelope, v1
from sparkpoint.metadata.wire import Writer
from tests.metadata.cases import checkpoint_case

SOURCE = "hdfs://nn:8020/ckpt/clicks/chk-42/_metadata"
GOOD = encode_metadata(checkpoint_case())


def _decode_error(data: bytes) -> MetadataError:
    with pytest.raises(MetadataError) as caught:
        decode_metadata(data, source=SOURCE)
    error = caught.value
    assert error.path == SOURCE
    assert str(error).startswith(SOURCE + ": ")
    return error


def test_truncation_at_every_byte_position_is_named() -> None:
    for length in range(len(GOOD)):
        error = _decode_error(GOOD[:length])
        assert error.defect.startswith("truncated"), (length, error.defect)


def test_every_single_bit_flip_is_detected() -> None:
    for position in range(len(GOOD)):
        for bit in range(8):
            flipped = bytearray(GOOD)
            flipped[position] ^= 1 << bit
            _decode_error(bytes(flipped))


def test_a_flip_in_the_body_is_a_checksum_mismatch() -> None:
    flipped = bytearray(GOOD)
    flipped[envelope.HEADER_SIZE + 3] ^= 0x10
    assert "checksum mismatch" in _decode_error(bytes(flipped)).defect


def test_a_flip_in_the_version_is_corruption_not_a_newer_version() -> None:
    flipped = bytearray(GOOD)
    flipped[9] ^= 0x02  # version 1 → 3
    assert "checksum mismatch" in _decode_error(bytes(flipped)).defect


def test_wrong_magic() -> None:
    error = _decode_error(json.dumps({"checkpoint": 42}).encode() + bytes(40))
    assert error.defect.startswith("wrong magic number")


def test_a_future_version_asks_for_an_upgrade() -> None:
    error = _decode_error(envelope.frame(v1.VERSION + 1, b"\x00" * 10))
    assert re.search(
        rf"format version {v1.VERSION + 1} is newer than this build reads", error.defect
    )


def test_version_zero_is_unknown() -> None:
    assert "unknown format version 0" in _decode_error(envelope.frame(0, b"")).defect


def test_trailing_garbage() -> None:
    error = _decode_error(GOOD + b"\n\n")
    assert error.defect == "trailing garbage: 2 bytes after the checksum"


def test_unknown_flags() -> None:
    head = bytearray(envelope.frame(1, b"")[: envelope.HEADER_SIZE])
    head[11] = 1
    data = bytes(head) + zlib.crc32(bytes(head)).to_bytes(4, "big")
    assert "unknown header flags" in _decode_error(data).defect


def _body(*, subtasks: list[tuple[int, OperatorSubtaskState]], keyed: bytes = b"") -> bytes:
    """A v1 body with one operator 'counts' (parallelism 4, max parallelism 128)."""
    w = Writer()
    w.text("clicks")
    w.uvarint(42)
    w.u8(v1.KINDS.index(CheckpointKind.CHECKPOINT))
    w.svarint(1000)
    w.svarint(2000)
    w.uvarint(0)  # no directories
    w.uvarint(1)
    w.text("counts")
    w.uvarint(4)
    w.uvarint(128)
    w.uvarint(len(subtasks) + (1 if keyed else 0))
    table = v1._Paths(None)
    for index, state in subtasks:
        v1._write_subtask(w, index, state, table)
    w.buf += keyed
    return bytes(w.buf)


def test_duplicate_subtask_indexes() -> None:
    body = _body(subtasks=[(1, OperatorSubtaskState()), (1, OperatorSubtaskState())])
    error = _decode_error(envelope.frame(1, body))
    assert error.defect == "operator 'counts': duplicate subtask index 1"


def _keyed_subtask(start: int, end_exclusive: int, offsets: tuple[int, ...], size: int) -> bytes:
    w = Writer()
    w.uvarint(0)  # subtask index
    w.uvarint(1)  # one keyed handle
    w.uvarint(start)
    w.uvarint(end_exclusive)
    w.packed(offsets)
    w.u8(v1.STREAM_INLINE)
    w.text("counts-0-0")
    w.raw(bytes(size))
    w.uvarint(0)  # no operator handles
    return bytes(w.buf)


def test_offsets_that_contradict_the_range() -> None:
    body = _body(subtasks=[], keyed=_keyed_subtask(0, 32, tuple(range(31)), 64))
    error = _decode_error(envelope.frame(1, body))
    assert "31 key-group offsets contradict the range [0, 31] of 32 key groups" in error.defect
    assert "operator 'counts' subtask 0" in error.defect


def test_offsets_beyond_the_stream() -> None:
    body = _body(subtasks=[], keyed=_keyed_subtask(0, 2, (0, 65), 64))
    assert "beyond stream size 64" in _decode_error(envelope.frame(1, body)).defect


def test_key_groups_beyond_max_parallelism() -> None:
    body = _body(subtasks=[], keyed=_keyed_subtask(127, 129, (0, 1), 4))
    assert "exceed max parallelism 128" in _decode_error(envelope.frame(1, body)).defect


def test_subtask_index_beyond_parallelism() -> None:
    body = _body(subtasks=[(4, OperatorSubtaskState())])
    assert "subtask index 4 is outside 0..3" in _decode_error(envelope.frame(1, body)).defect


def test_unread_bytes_after_the_last_operator() -> None:
    body = _body(subtasks=[(0, OperatorSubtaskState())]) + b"\x00"
    assert "1 unread bytes" in _decode_error(envelope.frame(1, body)).defect


def test_huge_counts_are_refused_before_allocating() -> None:
    w = Writer()
    w.text("clicks")
    w.uvarint(42)
    w.u8(0)
    w.svarint(0)
    w.svarint(0)
    w.uvarint(2**62)  # directories
    assert "cannot fit" in _decode_error(envelope.frame(1, bytes(w.buf))).defect


def test_relative_path_escaping_its_directory_is_refused() -> None:
    w = Writer()
    w.text("clicks")
    w.uvarint(42)
    w.u8(1)
    w.svarint(0)
    w.svarint(0)
    w.uvarint(1)
    w.text("../")
    w.uvarint(1)
    w.text("counts")
    w.uvarint(1)
    w.uvarint(1)
    w.uvarint(1)
    w.uvarint(0)
    w.uvarint(0)
    w.uvarint(1)
    w.uvarint(0)  # no states
    w.u8(v1.STREAM_FILE)
    w.uvarint(0)
    w.text("passwd")
    w.uvarint(3)
    with pytest.raises(MetadataError, match=r"'\.\./passwd' has an empty, '\.' or '\.\.'"):
        decode_metadata(envelope.frame(1, bytes(w.buf)), source=SOURCE, base_dir="/sp/x")


def test_inline_handle_name_survives() -> None:
    decoded = decode_metadata(GOOD, source=SOURCE)
    stream = decoded.operator_states["source"].subtask_states[1].operator[0].stream
    assert isinstance(stream, InlineStateHandle)
    assert stream.name == "source-1-0"


def test_an_unknown_keyed_handle_kind_in_version_2() -> None:
    w = Writer()
    w.uvarint(0)  # subtask index
    w.uvarint(1)  # one keyed handle
    w.u8(7)  # neither a key-groups stream (0) nor an embedded store's files (1)
    w.buf += bytes(8)  # what would follow
    body = _body(subtasks=[], keyed=bytes(w.buf))
    assert "unknown keyed handle kind 7" in _decode_error(envelope.frame(2, body)).defect


def test_an_incremental_handle_reaching_outside_its_store() -> None:
    w = Writer()
    w.uvarint(0)
    w.uvarint(1)
    w.u8(v1.KEYED_INCREMENTAL)
    for start, end_exclusive in ((0, 64), (0, 32)):  # key groups [0, 63], store [0, 31]
        w.uvarint(start)
        w.uvarint(end_exclusive)
    w.text("c0ffee")
    w.uvarint(0)  # no shared files
    w.uvarint(0)  # no private files
    w.uvarint(0)  # no operator handles
    body = _body(subtasks=[], keyed=bytes(w.buf))
    defect = _decode_error(envelope.frame(2, body)).defect
    assert "key groups [0, 63] are not inside the store's [0, 31]" in defect
