"""Encode → decode gives back the same checkpoint, for any valid checkpoint."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    FileStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.metadata import decode_metadata, encode_metadata, metadata_checksum
from tests.metadata.strategies import checkpoints


@settings(max_examples=300, deadline=None)
@given(checkpoints())
def test_any_checkpoint_survives_a_round_trip(checkpoint: CompletedCheckpoint) -> None:
    data = encode_metadata(checkpoint)
    assert decode_metadata(data, source="mem://_metadata") == checkpoint


@settings(max_examples=100, deadline=None)
@given(checkpoints())
def test_encoding_is_deterministic(checkpoint: CompletedCheckpoint) -> None:
    assert encode_metadata(checkpoint) == encode_metadata(checkpoint)


def _savepoint(directory: str) -> CompletedCheckpoint:
    def handle(i: int, path: str) -> KeyGroupsStateHandle:
        return KeyGroupsStateHandle(
            KeyGroupRange(i * 2, i * 2 + 1), (0, 5), FileStateHandle(path, 9)
        )

    subtasks = {
        0: OperatorSubtaskState(keyed=(handle(0, f"{directory}/counts-0-0"),)),
        1: OperatorSubtaskState(keyed=(handle(1, "hdfs://elsewhere:8020/shared/blob"),)),
    }
    return CompletedCheckpoint(
        job_id="clicks",
        checkpoint_id=12,
        kind=CheckpointKind.SAVEPOINT,
        trigger_timestamp_ms=1_700_000_000_000,
        completion_timestamp_ms=1_700_000_000_250,
        operator_states={"counts": OperatorState("counts", 2, 4, subtasks)},
    )


def test_savepoint_paths_are_relative_and_follow_the_file() -> None:
    original = "hdfs://nn:8020/savepoints/savepoint-clicks-0a1b2c"
    moved = "file:///restore/here/savepoint-clicks-0a1b2c"
    data = encode_metadata(_savepoint(original), relative_to=original)
    assert original.encode() not in data  # only the relative name is stored
    decoded = decode_metadata(data, source=f"{moved}/_metadata", base_dir=moved)
    streams = {
        i: s.keyed[0].stream for i, s in decoded.operator_states["counts"].subtask_states.items()
    }
    assert streams[0] == FileStateHandle(f"{moved}/counts-0-0", 9)
    # A file outside the savepoint directory keeps its absolute path.
    assert streams[1] == FileStateHandle("hdfs://elsewhere:8020/shared/blob", 9)


def test_without_base_dir_relative_paths_stay_relative() -> None:
    original = "/sp/savepoint-x"
    data = encode_metadata(_savepoint(original), relative_to=original + "/")
    decoded = decode_metadata(data, source="mem")
    stream = decoded.operator_states["counts"].subtask_states[0].keyed[0].stream
    assert stream == FileStateHandle("counts-0-0", 9)


def test_checksum_is_sha256_of_the_file() -> None:
    data = encode_metadata(_savepoint("/sp/a"))
    assert metadata_checksum(data) == "sha256:" + hashlib.sha256(data).hexdigest()
