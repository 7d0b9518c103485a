"""What runs on the executors, one call per partition (= subtask): read source ranges,
process an epoch, write snapshots, read state back. Plain picklable objects, so Spark
ships them with their parameters and a retried task does exactly the same.

Elements of the state RDD: ``(key, {state name → value})`` for keyed state and
``(Slot(i), {name → (mode, list)})`` for subtask i's operator state.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from sparkpoint.checkpoint import (
    IncrementalKeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
)
from sparkpoint.pipeline.event_time import MIN_WATERMARK, merge_maxima
from sparkpoint.pipeline.functions import KeyedProcessFunction, SideOutput
from sparkpoint.pipeline.keyed_run import (
    NO_TIME,
    OUT_COUNT,
    OUT_STATE,
    OUT_VALUE,
    EpochTime,
    epoch_outputs,
    run_function,
)
from sparkpoint.pipeline.keyed_state import KeyedStateBackend
from sparkpoint.pipeline.operator_state import OperatorStateStore, decode_element, encode_element
from sparkpoint.pipeline.partitioner import Slot
from sparkpoint.pipeline.sink import PendingFile, SinkWriter
from sparkpoint.pipeline.sources.base import EpochRange, SplitReader
from sparkpoint.pipeline.stages import RecordStage, run_record_stages
from sparkpoint.pipeline.state_ttl import drop_expired, now_ms
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.recovery.reader import read_operator_state, read_subtask_keyed_state
from sparkpoint.statefiles.keygroups import key_group_for_key_bytes, key_group_range_for_subtask
from sparkpoint.statefiles.keys import canonical_key_bytes, decode_key
from sparkpoint.statefiles.writers import KeyedStateWriter, OperatorStateWriter
from sparkpoint.storage.location import CheckpointLocation

#: Tags of the union of state and records (the value side of each pair).
STATE, RECORD = 0, 1


def tag_state(value: Any) -> tuple[int, Any]:
    return STATE, value


def tag_record(value: Any) -> tuple[int, Any]:
    return RECORD, value


@dataclass(frozen=True, slots=True)
class ReadTask:
    """Source ranges → ``(key, (order, record))``, or ``(order, record)`` without a
    ``key_selector`` (records that go through a DataFrame stage before they are keyed).
    The order is ``(split, position)``; ``stages`` (per-record, before key_by) add the
    index of each record they make from one source record: ``(split, position, n)``."""

    reader: SplitReader
    key_selector: Callable[[Any], Any] | None
    stages: tuple[RecordStage, ...] = ()

    def __call__(self, ranges: Iterable[EpochRange]) -> Iterator[tuple[Any, Any]]:
        for split in ranges:
            for position, record in self.reader.read(split):
                if self.stages:
                    outputs: Iterable[tuple[Any, Any]] = (
                        ((split.split, position, n), out)
                        for n, out in enumerate(run_record_stages(self.stages, record))
                    )
                else:
                    outputs = (((split.split, position), record),)
                for order, out in outputs:
                    if self.key_selector is None:
                        yield order, out
                    else:
                        yield self.key_selector(out), (order, out)


@dataclass(frozen=True, slots=True)
class KeyTask:
    """``(order, record)`` → ``(key, (order, record))``."""

    key_selector: Callable[[Any], Any]

    def __call__(self, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        for order, record in items:
            yield self.key_selector(record), (order, record)


@dataclass(frozen=True, slots=True)
class EpochTask:
    """Runs the keyed function over one partition of the union (state first, then the
    epoch's records). Records are processed in (split, position) order, never in the
    order the shuffle delivered them, so a recomputed partition gives the same result."""

    function: KeyedProcessFunction
    epoch: int
    parallelism: int
    notices: tuple[tuple[str, int], ...] = ()
    snapshot_id: int | None = None
    time: EpochTime = NO_TIME
    carried: bool = False

    def __call__(self, index: int, items: Iterable[tuple[Any, tuple[int, Any]]]) -> Iterator[Any]:
        entries, operator_state, records = _split_union(items)
        backend = KeyedStateBackend(entries)
        store = OperatorStateStore(operator_state)
        ran = run_function(self, backend, store, index, records)
        for key, entry in backend.items():
            yield OUT_STATE, key, entry
        yield from epoch_outputs(index, store, ran)


def _split_union(
    items: Iterable[tuple[Any, tuple[int, Any]]],
) -> tuple[dict[Any, dict[str, Any]], dict[str, Any] | None, list[tuple[Any, Any, Any]]]:
    """Keyed state entries, the operator state and the records of one union partition;
    records sorted by (split, position)."""
    entries: dict[Any, dict[str, Any]] = {}
    operator_state: dict[str, Any] | None = None
    records: list[tuple[Any, Any, Any]] = []
    for key, (tag, payload) in items:
        if tag == STATE:
            if isinstance(key, Slot):
                operator_state = payload
            else:
                entries[key] = payload
        else:
            records.append((payload[0], key, payload[1]))
    records.sort(key=lambda r: r[0])
    return entries, operator_state, records


def _main_outputs(items: Iterable[tuple[int, Any, Any]]) -> Iterator[tuple[int, Any, Any]]:
    """``(n, timestamp, output)`` of an epoch's outputs, side outputs left out."""
    main = (
        (timestamp, value)
        for tag, timestamp, value in items
        if tag == OUT_VALUE and not isinstance(value, SideOutput)
    )
    for n, (timestamp, value) in enumerate(main):
        yield n, timestamp, value


def only_outputs(index: int, items: Iterable[tuple[int, Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """An epoch's outputs as ``((partition, n), output)``: what stages after the keyed
    function take when one of them is a DataFrame stage."""
    for n, _, value in _main_outputs(items):
        yield (index, n), value


def timed_outputs(
    index: int, items: Iterable[tuple[int, Any, Any]]
) -> Iterator[tuple[tuple[int, int, int], Any]]:
    """An epoch's outputs as records of the next keyed stage: ``((timestamp, partition,
    n), output)`` — the order it processes them in (event time first), and the
    timestamp each carries (event_time.carried_timestamp)."""
    for n, timestamp, value in _main_outputs(items):
        yield (MIN_WATERMARK if timestamp is None else timestamp, index, n), value


def only_side_outputs(items: Iterable[tuple[int, Any, Any]]) -> Iterator[tuple[int, Any, Any]]:
    for item in items:
        if item[0] == OUT_VALUE and isinstance(item[2], SideOutput):
            yield item


def without_counts(items: Iterable[tuple[int, Any, Any]]) -> Iterator[tuple[int, Any, Any]]:
    for item in items:
        if item[0] != OUT_COUNT:
            yield item


def only_counts(items: Iterable[tuple[int, Any, Any]]) -> Iterator[tuple[int, Any, Any]]:
    """An epoch's counts and side outputs: what goes to the sink beside the outputs of
    a DataFrame stage after the keyed function."""
    for item in items:
        if item[0] == OUT_COUNT or (item[0] == OUT_VALUE and isinstance(item[2], SideOutput)):
            yield item


def tag_output(item: tuple[Any, Any]) -> tuple[int, Any, Any]:
    return OUT_VALUE, None, item[1]


def only_state(items: Iterable[tuple[int, Any, Any]]) -> Iterator[tuple[Any, Any]]:
    for tag, key, value in items:
        if tag == OUT_STATE:
            yield key, value


@dataclass(frozen=True, slots=True)
class SinkTask:
    """Writes one partition's outputs of an epoch (phase one of the sink), after the
    per-record ``stages`` after the keyed function, and reports ``(pending file or None,
    records processed)``."""

    writer: SinkWriter
    stages: tuple[RecordStage, ...] = ()

    def __call__(
        self, index: int, items: Iterable[tuple[int, Any, Any]]
    ) -> Iterator[tuple[PendingFile | None, int, dict[str, int]]]:
        outputs: list[Any] = []
        side: list[SideOutput] = []
        processed, maxima = 0, {}
        for tag, _, value in items:
            if tag == OUT_VALUE:
                if isinstance(value, SideOutput):
                    side.append(value)
                else:
                    outputs.extend(run_record_stages(self.stages, value))
            elif tag == OUT_COUNT:
                processed += value[0]
                merge_maxima(maxima, value[1])
        if side and getattr(self.writer, "takes_side_outputs", False):
            outputs.extend(side)  # a routed sink's writer sends them to their sinks
        yield self.writer.write(index, outputs), processed, maxima


def _attempt() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else context.attemptNumber()


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
                keyed.append((group, key_bytes, pickle.dumps(live, protocol=5)))
        keyed.sort()
        yield index, write_snapshot(self, index, keyed, operator_state), None


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
        stream = task.location.state_output(task.operator_uid, index, _attempt())
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
            _streams_only(subtask), max_parallelism=self.max_parallelism
        ):
            yield key, pickle.loads(value)
        scratch = Path(tempfile.gettempdir(), "sparkpoint-state")
        for _, key_bytes, value in _store_entries(subtask, scratch):
            yield decode_key(key_bytes), pickle.loads(value)
        yield from restored_operator_state(subtask)


def _streams_only(subtask: SubtaskRestore) -> SubtaskRestore:
    streams = [h for h in subtask.keyed if isinstance(h, KeyGroupsStateHandle)]
    return replace(subtask, keyed=tuple(streams))


def _store_entries(subtask: SubtaskRestore, scratch: Path) -> Iterator[tuple[int, bytes, bytes]]:
    for handle in subtask.keyed:
        if isinstance(handle, IncrementalKeyedStateHandle):
            from sparkpoint.pipeline.store_files import entries_of

            scratch.mkdir(parents=True, exist_ok=True)
            yield from entries_of(handle, scratch)


def keyed_entries(
    subtask: SubtaskRestore, max_parallelism: int, scratch: Path
) -> Iterator[tuple[int, bytes, bytes]]:
    """``(key group, canonical key bytes, value)`` of a subtask's keyed handles, of any
    kind: key-group streams (the canonical format), or an embedded store's files (read
    out of a copy made under ``scratch``)."""
    for group, key, value in read_subtask_keyed_state(
        _streams_only(subtask), max_parallelism=max_parallelism
    ):
        yield group, canonical_key_bytes(key), value
    yield from _store_entries(subtask, scratch)


def write_operator_snapshot(
    task: SnapshotParameters, index: int, operator_state: dict[str, Any]
) -> tuple[OperatorStateHandle, ...]:
    """Subtask ``index``'s operator state as a stream of its own (beside a store's files)."""
    if not operator_state:
        return ()
    stream = task.location.state_output(task.operator_uid, index, _attempt())
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
