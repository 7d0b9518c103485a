"""Snapshot writing and reading shared by both state backends: a subtask's keyed
entries and operator state to and from the checkpoint's streams, under the task's
attempt number.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from sparkpoint.checkpoint import (
    IncrementalKeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
)
from sparkpoint.pipeline.api.operator_state import decode_element, encode_element
from sparkpoint.pipeline.runtime.partitioner import Slot
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.recovery.reader import read_operator_state, read_subtask_keyed_state
from sparkpoint.statefiles.keygroups import key_group_range_for_subtask
from sparkpoint.statefiles.keys import canonical_key_bytes
from sparkpoint.statefiles.writers import KeyedStateWriter, OperatorStateWriter
from sparkpoint.storage.location import CheckpointLocation


def attempt() -> int:
    """The Spark task attempt's id (0 outside a task): part of a stream's name, so no two
    attempts at a snapshot write the same file. Not ``attemptNumber()``: that starts at 0
    again in a resubmitted stage (an executor lost with its shuffle output), whose
    attempt then found the first one's file in its way and the checkpoint was declined.
    ``taskAttemptId()`` is unique within the Spark application."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else context.taskAttemptId()


class SnapshotParameters(Protocol):
    location: CheckpointLocation
    operator_uid: str
    parallelism: int
    max_parallelism: int


def write_snapshot(
    task: SnapshotParameters,
    index: int,
    keyed: Iterable[tuple[int, bytes, bytes]],
    operator_state: dict[str, Any],
) -> OperatorSubtaskState | str:
    """Subtask ``index``'s snapshot as ONE stream: ``keyed`` entries (key group, key
    bytes, value bytes, in key-group order) then its operator state. Returns its state,
    or the reason it could not be written (which declines the checkpoint)."""
    key_groups = key_group_range_for_subtask(task.max_parallelism, task.parallelism, index)
    stream = None
    try:
        stream = task.location.state_output(task.operator_uid, index, attempt())
        writer = KeyedStateWriter(stream, key_groups, task.max_parallelism)
        current = None
        for group, key_bytes, value in keyed:
            if group != current:
                writer.begin_key_group(group)
                current = group
            writer.write_encoded(key_bytes, value)
        offsets = writer.finish()
        op_writer = OperatorStateWriter(stream, start_position=stream.tell())
        for name, (mode, elements) in sorted(operator_state.items()):
            op_writer.declare(name, mode)
            for element in elements:
                op_writer.add(name, mode, encode_element(element))
        handle = stream.close_and_get_handle()
    except Exception as exc:  # any failure to write is this subtask's decline reason
        if stream is not None:
            stream.abort()
        return f"{type(exc).__name__}: {exc}"
    return OperatorSubtaskState(
        keyed=(KeyGroupsStateHandle(key_groups, offsets, handle),),
        operator=(op_writer.handle(handle),) if operator_state else (),
    )


def streams_only(subtask: SubtaskRestore) -> SubtaskRestore:
    streams = [h for h in subtask.keyed if isinstance(h, KeyGroupsStateHandle)]
    return replace(subtask, keyed=tuple(streams))


def store_entries(subtask: SubtaskRestore, scratch: Path) -> Iterator[tuple[int, bytes, bytes]]:
    for handle in subtask.keyed:
        if isinstance(handle, IncrementalKeyedStateHandle):
            from sparkpoint.pipeline.state.rocksdb.files import entries_of

            scratch.mkdir(parents=True, exist_ok=True)
            yield from entries_of(handle, scratch)


def keyed_entries(
    subtask: SubtaskRestore, max_parallelism: int, scratch: Path
) -> Iterator[tuple[int, bytes, bytes]]:
    """``(key group, canonical key bytes, value)`` of a subtask's keyed handles, of any
    kind: key-group streams (the canonical format), or an embedded store's files (read
    out of a copy made under ``scratch``)."""
    for group, key, value in read_subtask_keyed_state(
        streams_only(subtask), max_parallelism=max_parallelism
    ):
        yield group, canonical_key_bytes(key), value
    yield from store_entries(subtask, scratch)


def write_operator_snapshot(
    task: SnapshotParameters, index: int, operator_state: dict[str, Any]
) -> tuple[OperatorStateHandle, ...]:
    """Subtask ``index``'s operator state as a stream of its own (beside a store's files)."""
    if not operator_state:
        return ()
    stream = task.location.state_output(task.operator_uid, index, attempt())
    try:
        writer = OperatorStateWriter(stream)
        for name, (mode, elements) in sorted(operator_state.items()):
            writer.declare(name, mode)
            for element in elements:
                writer.add(name, mode, encode_element(element))
        return (writer.handle(stream.close_and_get_handle()),)
    except BaseException:
        stream.abort()
        raise


def restored_operator_state(subtask: SubtaskRestore) -> Iterator[tuple[Slot, Any]]:
    """The ``Slot(index)`` element of a subtask's restored operator state, if any."""
    if subtask.operator:
        modes = {n: i.mode for h in subtask.operator for n, i in h.states.items()}
        elements = read_operator_state(subtask.operator)
        restored = {
            name: (mode, [decode_element(e) for e in elements.get(name, [])])
            for name, mode in modes.items()
        }
        yield Slot(subtask.index), restored
