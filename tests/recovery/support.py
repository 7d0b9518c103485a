"""Building checkpoints with real state streams for recovery tests.

``InlineOutput`` is the inline-state path storage takes for small state (bytes kept in
`_metadata`); ``LocalFileOutput`` writes a real file. Both satisfy the writers' stream
protocol; nothing here stands in for behaviour under test.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sparkpoint.checkpoint import (
    CheckpointKind,
    CheckpointPointer,
    CompletedCheckpoint,
    DistributionMode,
    FileStateHandle,
    InlineStateHandle,
    OperatorState,
    OperatorSubtaskState,
    StreamStateHandle,
)
from sparkpoint.statefiles.keygroups import key_group_for_key, key_group_range_for_subtask
from sparkpoint.statefiles.writers import OperatorStateWriter, write_keyed_state
from sparkpoint.storage import CheckpointLocation, CommittedMetadata


class InlineOutput:
    def __init__(self, name: str) -> None:
        self._name = name
        self._buffer = io.BytesIO()

    def write(self, data: bytes) -> int:
        return self._buffer.write(data)

    def close_and_get_handle(self) -> StreamStateHandle:
        return InlineStateHandle(self._name, self._buffer.getvalue())


class LocalFileOutput:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close_and_get_handle

    def write(self, data: bytes) -> int:
        return self._file.write(data)

    def close_and_get_handle(self) -> StreamStateHandle:
        self._file.close()
        return FileStateHandle(str(self._path), self._path.stat().st_size)


class LocalRangeReader:
    """Plain local files by path, read with seek (what storage's local filesystem does)."""

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)


def local_filesystem_for(uri: str) -> LocalRangeReader:
    return LocalRangeReader()


OutputFactory = Callable[[str], Any]


def keyed_operator_state(
    uid: str,
    state: Mapping[Any, bytes],
    max_parallelism: int,
    parallelism: int,
    output: OutputFactory,
) -> OperatorState:
    """Write ``state`` the way ``parallelism`` subtasks would: each its own key groups."""
    subtasks = {}
    for i in range(parallelism):
        key_groups = key_group_range_for_subtask(max_parallelism, parallelism, i)
        items = [
            (k, v) for k, v in state.items() if key_group_for_key(k, max_parallelism) in key_groups
        ]
        handle = write_keyed_state(output(f"{uid}-{i}"), items, key_groups, max_parallelism)
        subtasks[i] = OperatorSubtaskState(keyed=(handle,))
    return OperatorState(uid, parallelism, max_parallelism, subtasks)


def list_operator_state(
    uid: str,
    elements: Mapping[int, Mapping[str, tuple[DistributionMode, list[bytes]]]],
    max_parallelism: int,
    parallelism: int,
    output: OutputFactory,
) -> OperatorState:
    """Operator list state: per old subtask, per state name, (mode, elements)."""
    subtasks = {}
    for i, states in elements.items():
        out = output(f"{uid}-op-{i}")
        writer = OperatorStateWriter(out)
        for name, (mode, items) in states.items():
            writer.declare(name, mode)
            for item in items:
                writer.add(name, mode, item)
        subtasks[i] = OperatorSubtaskState(operator=(writer.handle(out.close_and_get_handle()),))
    return OperatorState(uid, parallelism, max_parallelism, subtasks)


def checkpoint_of(
    *states: OperatorState, job_id: str = "job", checkpoint_id: int = 5
) -> CompletedCheckpoint:
    return CompletedCheckpoint(
        job_id,
        checkpoint_id,
        CheckpointKind.CHECKPOINT,
        1_000,
        2_000,
        {s.operator_uid: s for s in states},
    )


def write_keyed_checkpoint(
    location: CheckpointLocation,
    state: Mapping[Any, bytes],
    *,
    uid: str = "count",
    max_parallelism: int = 128,
    parallelism: int = 3,
    checkpoint_id: int | None = None,
) -> tuple[CompletedCheckpoint, CommittedMetadata]:
    """Write ``state`` through real storage as ``parallelism`` subtasks would, commit
    `_metadata`, and return the checkpoint and what was committed."""
    keyed = keyed_operator_state(
        uid,
        state,
        max_parallelism,
        parallelism,
        lambda name: location.state_output(uid, int(name.rsplit("-", 1)[1]), 0),
    )
    kind = CheckpointKind.SAVEPOINT if location.is_savepoint else CheckpointKind.CHECKPOINT
    cid = location.checkpoint_id or checkpoint_id or 1
    checkpoint = CompletedCheckpoint(location.job_id, cid, kind, 1_000, 2_000, {uid: keyed})
    return checkpoint, location.commit_metadata(checkpoint)


def pointer_for(checkpoint: CompletedCheckpoint, committed: CommittedMetadata) -> CheckpointPointer:
    return CheckpointPointer(
        checkpoint.job_id,
        checkpoint.checkpoint_id,
        checkpoint.kind,
        checkpoint.trigger_timestamp_ms,
        checkpoint.completion_timestamp_ms,
        committed.uri,
        checkpoint.state_size,
        committed.checksum,
    )
