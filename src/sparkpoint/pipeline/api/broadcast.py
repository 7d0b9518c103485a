"""Broadcast state (Flink's broadcast state pattern; docs/pipeline.md, "Broadcast
state"): a low-rate stream — rules, thresholds, a small table — sent to every subtask of
a keyed function, which keeps it in maps every subtask holds in full.

``keyed.connect(rules.broadcast(descriptor)).process(fn)`` with a
:class:`KeyedBroadcastProcessFunction`: ``process_broadcast_element(value, ctx)`` sees
each record of the broadcast stream on every subtask and may write the broadcast state
(``ctx.get_broadcast_state(descriptor)``); ``process_element(key, value, ctx)`` and
``on_timer`` read it only, so every subtask holds the same maps. An epoch's broadcast
records are processed first, on every subtask, before its timers and keyed records: a
rule read in epoch n applies to everything epoch n processes, for every key.

The maps are operator state of the keyed stage with ``BROADCAST`` redistribution (one
element per map: the map): a checkpoint holds each subtask's copy, and a restore at any
parallelism gives every new subtask one of the (equal) copies.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sparkpoint.checkpoint import DistributionMode
from sparkpoint.pipeline.api.functions import Context, KeyedProcessFunction
from sparkpoint.pipeline.api.keyed_state import MapStateDescriptor
from sparkpoint.pipeline.api.operator_state import (
    OperatorListState,
    OperatorListStateDescriptor,
    OperatorStateStore,
)
from sparkpoint.pipeline.api.several_sources import (
    BROADCAST_SIDE,
    check_mergeable,
    folded_inputs,
    merged_into,
)
from sparkpoint.statefiles.keys import Key

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline

K = TypeVar("K")
V = TypeVar("V")

#: Before a map's name in the operator state that holds it.
BROADCAST_STATE_PREFIX = "broadcast/"


class ReadOnlyBroadcastState(Generic[K, V]):
    """A broadcast map as ``process_element`` and ``on_timer`` see it. Values are the
    stored objects: change them only through ``process_broadcast_element``'s view."""

    def __init__(self, values: dict[K, V]) -> None:
        self._values = values

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._values.get(key, default)

    def contains(self, key: K) -> bool:
        return key in self._values

    def items(self) -> list[tuple[K, V]]:
        return list(self._values.items())

    def keys(self) -> list[K]:
        return list(self._values)

    def values(self) -> list[V]:
        return list(self._values.values())

    def is_empty(self) -> bool:
        return not self._values

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._values))


class BroadcastState(ReadOnlyBroadcastState[K, V]):
    """A broadcast map as ``process_broadcast_element`` sees it: read and write."""

    def __init__(self, values: dict[K, V], stored: OperatorListState[dict[K, V]]) -> None:
        super().__init__(values)
        self._stored = stored

    def put(self, key: K, value: V) -> None:
        self._values[key] = value
        self._stored.update([self._values])

    def remove(self, key: K) -> None:
        self._values.pop(key, None)
        self._stored.update([self._values])

    def clear(self) -> None:
        self._values.clear()
        self._stored.update([self._values])


class BroadcastStates:
    """One subtask's broadcast maps in one epoch, each kept as the one element of an
    operator list state with BROADCAST redistribution. Only the maps of the descriptors
    given to ``broadcast`` exist."""

    def __init__(
        self, store: OperatorStateStore, declared: tuple[MapStateDescriptor[Any, Any], ...]
    ):
        self._store = store
        self._declared = {d.name for d in declared}
        self._maps: dict[str, tuple[dict[Any, Any], OperatorListState[Any]]] = {}

    def _map(self, descriptor: MapStateDescriptor[Any, Any]) -> tuple[dict[Any, Any], Any]:
        name = descriptor.name
        if name not in self._declared:
            raise ValueError(
                f"broadcast state {name!r} was not given to broadcast(): declare it with "
                f"stream.broadcast(MapStateDescriptor({name!r})) "
                f"(declared: {sorted(self._declared)})"
            )
        if name not in self._maps:
            stored = self._store.get_list_state(
                OperatorListStateDescriptor(
                    BROADCAST_STATE_PREFIX + name, DistributionMode.BROADCAST
                )
            )
            elements = stored.get()
            values = dict(elements[0]) if elements else {}
            stored.update([values])
            self._maps[name] = (values, stored)
        return self._maps[name]

    def read_only(self, descriptor: MapStateDescriptor[K, V]) -> ReadOnlyBroadcastState[K, V]:
        return ReadOnlyBroadcastState(self._map(descriptor)[0])

    def writable(self, descriptor: MapStateDescriptor[K, V]) -> BroadcastState[K, V]:
        values, stored = self._map(descriptor)
        return BroadcastState(values, stored)


class BroadcastContext(Context):
    """Given to ``process_broadcast_element``: the broadcast state to read and write,
    ``collect`` and ``output`` (every subtask emits what it collects), the clocks.
    There is no current key here, so no keyed state and no timers."""

    def get_broadcast_state(self, descriptor: MapStateDescriptor[K, V]) -> BroadcastState[K, V]:
        assert self._broadcast is not None
        return self._broadcast.writable(descriptor)

    def register_event_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(_NO_KEY)

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(_NO_KEY)

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(_NO_KEY)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        raise RuntimeError(_NO_KEY)


_NO_KEY = "process_broadcast_element has no key: set timers in process_element or on_timer"


class KeyedBroadcastProcessFunction(KeyedProcessFunction):
    """The keyed function of a keyed stream connected to a broadcast stream.

    >>> RULES = MapStateDescriptor("rules")
    >>> class Limits(KeyedBroadcastProcessFunction):
    ...     def process_broadcast_element(self, rule, ctx):
    ...         ctx.get_broadcast_state(RULES).put(rule["page"], rule["limit"])
    ...     def process_element(self, key, payment, ctx):
    ...         limit = ctx.get_broadcast_state(RULES).get(payment["page"])
    ...         if limit is not None and payment["amount"] > limit:
    ...             ctx.collect(payment)
    """

    #: The maps given to ``broadcast`` (set on the pipeline's copy of the function).
    broadcast_descriptors: tuple[MapStateDescriptor[Any, Any], ...] = ()

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        """A keyed record; ``ctx.get_broadcast_state(descriptor)`` reads the maps."""
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: BroadcastContext) -> None:
        """A record of the broadcast stream, on every subtask."""
        raise NotImplementedError


@dataclass(frozen=True)
class BroadcastStream:
    """``stream.broadcast(descriptor, …)``: give it to a keyed stream's ``connect``."""

    stream: Pipeline
    descriptors: tuple[MapStateDescriptor[Any, Any], ...]

    def connected_to(self, keyed: Pipeline) -> BroadcastConnectedStream:
        job = keyed.job_id
        check_mergeable(keyed, self.stream, "connect", "the broadcast stream")
        check_mergeable(keyed, keyed, "connect", "this stream")
        if keyed.key_selector is None:
            raise ValueError(
                f"pipeline {job}: a broadcast stream connects to a keyed stream: "
                "call key_by before connect"
            )
        if keyed.second_key_selector is not None:
            raise ValueError(f"pipeline {job}: a connected stream cannot connect again")
        inputs = (*folded_inputs(keyed, 0), *folded_inputs(self.stream, BROADCAST_SIDE))
        merged = merged_into(keyed, inputs, "connect")
        pipeline = replace(merged, key_selector=keyed.key_selector, key_type=keyed.key_type)
        return BroadcastConnectedStream(pipeline, self.descriptors)


@dataclass(frozen=True)
class BroadcastConnectedStream:
    """A keyed stream connected to a broadcast stream: ``process`` ends it."""

    connected: Pipeline
    descriptors: tuple[MapStateDescriptor[Any, Any], ...]

    def process(
        self, function: KeyedBroadcastProcessFunction, *, uid: str | None = None
    ) -> Pipeline:
        """The keyed stage ``uid`` (default ``process``), with the broadcast maps."""
        if not isinstance(function, KeyedBroadcastProcessFunction):
            raise TypeError(
                f"pipeline {self.connected.job_id}: a stream connected to a broadcast stream "
                "goes into a KeyedBroadcastProcessFunction (process_element, "
                f"process_broadcast_element), not {type(function).__name__}"
            )
        bound = copy.copy(function)  # the author's object stays as it was
        bound.broadcast_descriptors = self.descriptors
        return self.connected.process(bound, uid=uid)


def broadcast_stream(stream: Pipeline, descriptors: tuple[Any, ...]) -> BroadcastStream:
    """What ``Pipeline.broadcast`` makes, after its checks."""
    job = stream.job_id
    if not descriptors or not all(isinstance(d, MapStateDescriptor) for d in descriptors):
        raise TypeError(
            f"pipeline {job}: broadcast takes one or more MapStateDescriptor, got {descriptors!r}"
        )
    names = [d.name for d in descriptors]
    if len(set(names)) != len(names):
        raise ValueError(f"pipeline {job}: broadcast of two maps of one name: {names}")
    if stream.key_selector is not None:
        raise ValueError(
            f"pipeline {job}: broadcast takes a stream that is not keyed (every subtask "
            "gets all of its records)"
        )
    return BroadcastStream(stream, tuple(descriptors))
