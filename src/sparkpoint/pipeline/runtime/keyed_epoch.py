"""One epoch of the keyed function, whatever holds the state (state/memory/tasks.py,
state/rocksdb/tasks.py): the lifecycle calls, a broadcast stream's records (api/broadcast.py),
the due timers, then the records, and the result elements it makes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.pipeline.api.broadcast import (
    BroadcastContext,
    BroadcastStates,
    KeyedBroadcastProcessFunction,
)
from sparkpoint.pipeline.api.event_time import (
    MIN_WATERMARK,
    WatermarkStrategy,
    carried_timestamp,
    split_of,
)
from sparkpoint.pipeline.api.functions import (
    Context,
    InitializationContext,
    KeyedProcessFunction,
    RuntimeContext,
    TimerContext,
)
from sparkpoint.pipeline.api.keyed_state import KeyedStateBackend
from sparkpoint.pipeline.api.operator_state import OperatorStateStore
from sparkpoint.pipeline.api.timers import TimerService
from sparkpoint.pipeline.runtime.inputs import InputRecord
from sparkpoint.pipeline.runtime.partitioner import Slot
from sparkpoint.pipeline.runtime.records import Counts, NewState, Output, Result


@dataclass(frozen=True, slots=True)
class EpochTime:
    """The clocks of one epoch, fixed by the driver so a retried task sees the same:
    its processing time, the watermark it runs under, and how records carry event time
    (None: no event time)."""

    processing_time_ms: int = MIN_WATERMARK
    watermark: int = MIN_WATERMARK
    strategy: WatermarkStrategy | None = None


#: A pass that fires no timer (the snapshot hook's).
NO_TIME = EpochTime()


@dataclass(frozen=True, slots=True)
class EpochParameters:
    """What the driver fixes for one epoch of one keyed stage, the same for each of its
    subtasks whatever holds their state: the function, the epoch, the checkpoint notices
    to deliver first, the checkpoint whose ``snapshot_state`` follows (None: none) and
    the clocks."""

    function: KeyedProcessFunction
    epoch: int
    parallelism: int
    notices: tuple[tuple[str, int], ...] = ()
    snapshot_id: int | None = None
    time: EpochTime = NO_TIME
    #: A later keyed stage: records carry the timestamp their stage gave them.
    carried: bool = False


@dataclass
class EpochRun:
    """What one epoch of one subtask made: ``(timestamp, output)`` pairs (side outputs
    among them), the number of records processed and, per source split, the largest
    event time seen."""

    out: list[tuple[int | None, Any]] = field(default_factory=list)
    processed: int = 0
    maxima: dict[str, int] = field(default_factory=dict)


def uses_timers(fn: KeyedProcessFunction) -> bool:
    return type(fn).on_timer is not KeyedProcessFunction.on_timer


def run_function(
    task: EpochParameters,
    backend: KeyedStateBackend,
    store: OperatorStateStore,
    index: int,
    records: list[tuple[Any, Any, Any]],
) -> EpochRun:
    """One epoch of the keyed function: the broadcast records among ``records`` (key
    ``Slot``), due timers in timestamp order, then the keyed ``records`` (sorted
    ``(order, key, record)``)."""
    fn = task.function
    clock = task.time
    fn.initialize_state(InitializationContext(store, index, task.parallelism))
    fn.open(RuntimeContext(backend, index, task.parallelism, task.epoch))
    for kind, checkpoint_id in task.notices:
        notify = (
            fn.notify_checkpoint_complete if kind == "complete" else fn.notify_checkpoint_aborted
        )
        notify(checkpoint_id)
    broadcast: list[tuple[Any, Any, Any]] = []
    states = None
    if isinstance(fn, KeyedBroadcastProcessFunction):  # its broadcast records: Slot keys
        broadcast = [r for r in records if isinstance(r[1], Slot)]
        records = [r for r in records if not isinstance(r[1], Slot)]
        states = BroadcastStates(store, fn.broadcast_descriptors)
    # A broadcast record is counted once, by subtask 0 (every subtask has a copy).
    ran = EpochRun(processed=len(records) + (len(broadcast) if index == 0 else 0))
    if clock.processing_time_ms != NO_TIME.processing_time_ms:
        backend.processing_time_ms = clock.processing_time_ms  # state TTLs go by it too
    timers = TimerService(backend, clock.processing_time_ms, clock.watermark)
    if states is not None:  # first: what they change applies to all this epoch does
        context = BroadcastContext(ran.out, index, task.epoch, timers, states)
        _process_broadcast(fn, broadcast, context, ran)  # type: ignore[arg-type]
    if uses_timers(fn):
        _fire_timers(fn, timers, backend, ran.out, index, task.epoch, states)
    ctx = Context(ran.out, index, task.epoch, timers, states)
    strategy = clock.strategy
    for order, key, element in records:
        value = element
        backend.set_current_key(key)
        ctx.current_key = key
        process = fn.process_element
        ts: int | None = None
        if isinstance(element, InputRecord):  # a pipeline of several sources (inputs.py)
            if element.side == 1:
                process = fn.process_element2  # type: ignore[attr-defined]
            ts, value = element.timestamp, element.record
            ctx.timestamp = ts
        elif task.carried:
            ctx.timestamp = carried_timestamp(order)
        elif strategy is not None:
            ts = ctx.timestamp = strategy.timestamp_of(value)
        if ts is not None and not task.carried:
            _note_time(ran, order, ts)
        process(key, value, ctx)
    if task.snapshot_id is not None:
        fn.snapshot_state(task.snapshot_id)
    fn.close()
    return ran


def _process_broadcast(
    fn: KeyedBroadcastProcessFunction,
    broadcast: list[tuple[Any, Any, Any]],
    ctx: BroadcastContext,
    ran: EpochRun,
) -> None:
    """An epoch's broadcast records (``(order, Slot, InputRecord)``), in order."""
    for order, _, element in broadcast:
        ctx.timestamp = element.timestamp
        _note_time(ran, order, element.timestamp)
        fn.process_broadcast_element(element.record, ctx)


def _note_time(ran: EpochRun, order: Any, ts: int | None) -> None:
    """The largest event time of the record's source split, with this record's."""
    split = split_of(order)
    if ts is not None and split is not None and ts > ran.maxima.get(split, MIN_WATERMARK):
        ran.maxima[split] = ts


def _fire_timers(
    fn: KeyedProcessFunction,
    timers: TimerService,
    backend: KeyedStateBackend,
    out: list[tuple[int | None, Any]],
    index: int,
    epoch: int,
    broadcast: BroadcastStates | None,
) -> None:
    timers.collect_due(backend.items())
    ctx = TimerContext(out, index, epoch, timers, broadcast)
    for key, ts, domain in timers.pop_due():
        ctx.current_key = key
        ctx.timestamp = ts
        ctx.time_domain = domain
        fn.on_timer(ts, key, ctx)


def epoch_outputs(index: int, store: OperatorStateStore, ran: EpochRun) -> Iterator[Result]:
    """An epoch's result elements after its keyed state (runtime/records.py): operator
    state, outputs, and the counts."""
    snapshot = store.snapshot()
    if snapshot:
        yield NewState, Slot(index), snapshot
    for timestamp, value in ran.out:
        yield Output, timestamp, value
    yield Counts, index, (ran.processed, ran.maxima)
