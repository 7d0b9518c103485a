"""What a pipeline author implements: :class:`KeyedProcessFunction` (or, for two
connected streams, :class:`KeyedCoProcessFunction`), and its contexts.

Lifecycle on Spark: the function object is shipped to the executors with every epoch, so
each epoch's task of subtask ``i`` works on a fresh copy. Per task: ``initialize_state``
(operator state restored or carried over from the previous epoch), ``open``,
``notify_checkpoint_complete``/``aborted`` for notices that arrived since the last epoch,
``on_timer`` for each timer due (in timestamp order),
``process_element`` for each of the epoch's records of the subtask's keys (in a
deterministic order), ``snapshot_state`` when a checkpoint is taken at the end of this
epoch, ``close``. Keep nothing in plain attributes across epochs: use state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sparkpoint.pipeline.api.keyed_state import (
    KeyedStateBackend,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.api.operator_state import (
    OperatorListState,
    OperatorListStateDescriptor,
    OperatorStateStore,
)
from sparkpoint.pipeline.api.timers import EVENT_TIME, PROCESSING_TIME, TimerService
from sparkpoint.statefiles.keys import Key

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.broadcast import BroadcastStates, ReadOnlyBroadcastState

V = TypeVar("V")
K = TypeVar("K")


class RuntimeContext:
    """Where a function declares keyed state (in ``open``) and learns where it runs."""

    def __init__(
        self, backend: KeyedStateBackend, subtask: int, parallelism: int, epoch: int
    ) -> None:
        self._backend = backend
        self.subtask = subtask
        self.parallelism = parallelism
        self.epoch = epoch

    def get_state(self, descriptor: ValueStateDescriptor[V]) -> ValueState[V]:
        self._backend.declare(descriptor)
        return ValueState(self._backend, descriptor)

    def get_list_state(self, descriptor: ListStateDescriptor[V]) -> ListState[V]:
        self._backend.declare(descriptor)
        return ListState(self._backend, descriptor)

    def get_map_state(self, descriptor: MapStateDescriptor[K, V]) -> MapState[K, V]:
        self._backend.declare(descriptor)
        return MapState(self._backend, descriptor)


class InitializationContext:
    """Given to ``initialize_state``: the subtask's operator list states."""

    def __init__(self, store: OperatorStateStore, subtask: int, parallelism: int) -> None:
        self._store = store
        self.subtask = subtask
        self.parallelism = parallelism

    @property
    def is_restored(self) -> bool:
        """True when operator state came from a checkpoint or an earlier epoch."""
        return self._store.is_restored

    def get_list_state(self, descriptor: OperatorListStateDescriptor[V]) -> OperatorListState[V]:
        return self._store.get_list_state(descriptor)


@dataclass(frozen=True, slots=True)
class SideOutput:
    """A value emitted with ``ctx.output(tag, value)``: it goes to the sink given for
    ``tag`` (``Pipeline.side_output``), past the stages after the keyed function."""

    tag: str
    value: Any


class Context:
    """Given to ``process_element``: emit outputs with :meth:`collect` (or to a side
    output with :meth:`output`), read the time, register and delete the current key's
    timers. ``timestamp`` is the record's event time (None without a watermark
    strategy)."""

    def __init__(
        self,
        out: list[tuple[int | None, Any]],
        subtask: int,
        epoch: int,
        timers: TimerService | None = None,
        broadcast: BroadcastStates | None = None,
    ) -> None:
        self._out = out
        self.subtask = subtask
        self.epoch = epoch
        self.current_key: Key = None
        self.timestamp: int | None = None
        self._timers = timers
        self._broadcast = broadcast

    def collect(self, value: Any) -> None:
        """Emit ``value``; it carries the timestamp of the record or timer being
        processed to a next keyed stage."""
        self._out.append((self.timestamp, value))

    def output(self, tag: str, value: Any) -> None:
        """Emit ``value`` to the side output ``tag``."""
        self._out.append((self.timestamp, SideOutput(tag, value)))

    def get_broadcast_state(
        self, descriptor: MapStateDescriptor[K, V]
    ) -> ReadOnlyBroadcastState[K, V]:
        """A broadcast map of a KeyedBroadcastProcessFunction, to read (broadcast.py)."""
        if self._broadcast is None:
            raise RuntimeError(
                "broadcast state belongs to a KeyedBroadcastProcessFunction of a stream "
                "connected to a broadcast stream (keyed.connect(stream.broadcast(…)))"
            )
        return self._broadcast.read_only(descriptor)

    def _service(self) -> TimerService:
        if self._timers is None:
            raise RuntimeError("timers are only available while processing a record or a timer")
        return self._timers

    def current_watermark(self) -> int:
        """The pipeline's watermark this epoch runs under (MIN_WATERMARK before any)."""
        return self._service().watermark

    def current_processing_time(self) -> int:
        """This epoch's processing time in ms (one value per epoch, so a retried task
        sees the same)."""
        return self._service().processing_time_ms

    def register_event_time_timer(self, timestamp: int) -> None:
        """``on_timer`` is called once the watermark reaches ``timestamp``."""
        self._service().register(EVENT_TIME, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        """``on_timer`` is called in the first epoch whose processing time reaches it."""
        self._service().register(PROCESSING_TIME, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._service().delete(EVENT_TIME, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._service().delete(PROCESSING_TIME, timestamp)


class TimerContext(Context):
    """Given to ``on_timer``: a :class:`Context` whose ``timestamp`` is the timer's and
    whose ``time_domain`` says which clock it was on."""

    time_domain: int = EVENT_TIME

    @property
    def is_event_time(self) -> bool:
        return self.time_domain == EVENT_TIME


class KeyedProcessFunction:
    """Override ``process_element``; the rest are optional hooks.

    >>> class Count(KeyedProcessFunction):
    ...     def open(self, ctx):
    ...         self.count = ctx.get_state(ValueStateDescriptor("count", 0))
    ...     def process_element(self, key, value, ctx):
    ...         self.count.update(self.count.value() + 1)
    ...         ctx.collect((key, self.count.value()))
    """

    def initialize_state(self, ctx: InitializationContext) -> None:
        """Declare operator list state (restored values are already in it)."""

    def open(self, ctx: RuntimeContext) -> None:
        """Declare keyed state."""

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        """A timer of ``key`` registered for ``timestamp`` fired (``ctx.time_domain``);
        state views read and write ``key``'s state."""

    def snapshot_state(self, checkpoint_id: int) -> None:
        """A checkpoint is taken after this epoch: bring operator state up to date.
        For a trigger that arrived while the epoch ran, this is called in a pass of its
        own right after it: ``open``, ``snapshot_state``, ``close``, no records."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` will never complete."""

    def close(self) -> None:
        """End of this epoch's task."""


class KeyedCoProcessFunction(KeyedProcessFunction):
    """The keyed function of two connected streams (``a.key_by(…).connect(b.key_by(…))``):
    ``process_element1`` gets the first stream's records, ``process_element2`` the
    second's; both read and write the state of the same key and set its timers, and
    ``on_timer`` is called for either. Records of the two inputs are processed in a
    deterministic order within an epoch, not in event-time order across the inputs: a
    result that must wait for the other input waits for the watermark (a timer).

    >>> class LatestPrice(KeyedCoProcessFunction):
    ...     def open(self, ctx):
    ...         self.price = ctx.get_state(ValueStateDescriptor("price"))
    ...     def process_element1(self, key, order, ctx):
    ...         ctx.collect({**order, "price": self.price.value()})
    ...     def process_element2(self, key, price, ctx):
    ...         self.price.update(price["price"])
    """

    def process_element1(self, key: Key, value: Any, ctx: Context) -> None:
        """A record of the first input (the stream ``connect`` was called on)."""
        raise NotImplementedError

    def process_element2(self, key: Key, value: Any, ctx: Context) -> None:
        """A record of the second input (the stream given to ``connect``)."""
        raise NotImplementedError

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        self.process_element1(key, value, ctx)
