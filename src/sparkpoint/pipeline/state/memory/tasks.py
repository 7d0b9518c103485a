"""The memory backend's tasks, one call per partition (= subtask): process an epoch
over state that travels in the state RDD, write its snapshot, read it back.

Elements of the state RDD: ``(key, {state name → value})`` for keyed state and
``(Slot(i), {name → (mode, list)})`` for subtask i's operator state.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.checkpoint import OperatorSubtaskState
from sparkpoint.pipeline.api.keyed_state import KeyedStateBackend
from sparkpoint.pipeline.api.operator_state import OperatorStateStore
from sparkpoint.pipeline.api.ttl import drop_expired, now_ms
from sparkpoint.pipeline.runtime.keyed_epoch import (
    EpochParameters,
    epoch_outputs,
    run_function,
)
from sparkpoint.pipeline.runtime.partitioner import Slot
from sparkpoint.pipeline.runtime.records import NewState, Record, Result
from sparkpoint.pipeline.state import pickles
from sparkpoint.pipeline.state.snapshots import (
    restored_operator_state,
    store_entries,
    streams_only,
    write_snapshot,
)
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.recovery.reader import read_subtask_keyed_state
from sparkpoint.statefiles.keygroups import key_group_for_key_bytes
from sparkpoint.statefiles.keys import canonical_key_bytes, decode_key
from sparkpoint.storage.location import CheckpointLocation


@dataclass(frozen=True, slots=True)
class EpochTask:
    """Runs the keyed function over one partition of the union (state first, then the
    epoch's records). Records are processed in (split, position) order, never in the
    order the shuffle delivered them, so a recomputed partition gives the same result."""

    parameters: EpochParameters

    def __call__(
        self, index: int, items: Iterable[tuple[Any, tuple[Any, ...]]]
    ) -> Iterator[Result]:
        entries, operator_state, records = _split_union(items)
        backend = KeyedStateBackend(entries)
        store = OperatorStateStore(operator_state)
        ran = run_function(self.parameters, backend, store, index, records)
        for key, entry in backend.items():
            yield NewState, key, entry
        yield from epoch_outputs(index, store, ran)


def _split_union(
    items: Iterable[tuple[Any, tuple[Any, ...]]],
) -> tuple[dict[Any, dict[str, Any]], dict[str, Any] | None, list[tuple[Any, Any, Any]]]:
    """Keyed state entries, the operator state and the records of one union partition
    (runtime/records.py); records sorted by (split, position)."""
    entries: dict[Any, dict[str, Any]] = {}
    operator_state: dict[str, Any] | None = None
    records: list[tuple[Any, Any, Any]] = []
    for key, element in items:
        if element[0] is Record:
            records.append((element[1], key, element[2]))
        elif isinstance(key, Slot):
            operator_state = element[1]
        else:
            entries[key] = element[1]
    records.sort(key=lambda r: r[0])
    return entries, operator_state, records


@dataclass(frozen=True, slots=True)
class SnapshotTask:
    """Writes subtask ``index``'s state as ONE stream: keyed state in key-group order
    (one offset per key group), then its operator state. Yields ``(index, state, None)``
    or, when the snapshot cannot be written, ``(index, reason, None)``: a failed snapshot
    declines the checkpoint, it must not fail the job. (The third item is the on-disk
    backend's store token.)"""

    location: CheckpointLocation
    operator_uid: str
    parallelism: int
    max_parallelism: int

    def __call__(
        self, index: int, items: Iterable[tuple[Any, Any]]
    ) -> Iterator[tuple[int, OperatorSubtaskState | str, None]]:
        keyed, operator_state, now = [], {}, now_ms()
        for key, value in items:
            if isinstance(key, Slot):
                operator_state = value
            elif (live := drop_expired(value, now)) is not None:  # state TTL's cleanup
                key_bytes = canonical_key_bytes(key)
                group = key_group_for_key_bytes(key_bytes, self.max_parallelism)
                keyed.append((group, key_bytes, pickles.dumps(live)))
        keyed.sort()
        yield index, write_snapshot(self, index, keyed, operator_state), None


@dataclass(frozen=True, slots=True)
class LoadTask:
    """Reads subtask ``index``'s state back from its handles (after a snapshot, or on
    restore) into state-RDD elements. Runs on the partition that the ``Slot(index)``
    marker went to, so what it yields is already where the partitioner says."""

    subtasks: tuple[SubtaskRestore, ...]
    max_parallelism: int

    def __call__(self, index: int, markers: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        for _ in markers:
            pass
        subtask = self.subtasks[index]
        for _, key, value in read_subtask_keyed_state(
            streams_only(subtask), max_parallelism=self.max_parallelism
        ):
            yield key, pickles.loads(value)
        scratch = Path(tempfile.gettempdir(), "sparkpoint-state")
        for _, key_bytes, value in store_entries(subtask, scratch):
            yield decode_key(key_bytes), pickles.loads(value)
        yield from restored_operator_state(subtask)


@dataclass(frozen=True, slots=True)
class MemoryTasks:
    """The memory backend's tasks for one keyed operator (state/tasks.py's BackendTasks)."""

    operator_uid: str
    parallelism: int
    max_parallelism: int

    def epoch(self, parameters: EpochParameters) -> EpochTask:
        return EpochTask(parameters)

    def snapshot(self, location: CheckpointLocation, base: object) -> SnapshotTask:
        """``base`` is for incremental backends: this one writes whole snapshots."""
        return SnapshotTask(location, self.operator_uid, self.parallelism, self.max_parallelism)

    def load(self, subtasks: tuple[SubtaskRestore, ...], keep: tuple[Any, ...]) -> LoadTask:
        return LoadTask(subtasks, self.max_parallelism)

    def close(self) -> None:
        """Nothing outlives the tasks: the state is in the state RDD."""
