"""The inputs of a pipeline of several sources (``union``, ``connect``): each source with
the stages that run on its records only, the typed key selector ``key_by(key_type=…)``
makes, and the checks a pipeline of several sources passes (builder.py calls them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.event_time import WatermarkStrategy
from sparkpoint.pipeline.api.stages import DataFrameStage, Stage
from sparkpoint.pipeline.sources.base import Source

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline

#: The ``side`` of a broadcast stream's source (broadcast.py).
BROADCAST_SIDE = 2


@dataclass(frozen=True, slots=True)
class SourceInput:
    """One source of a pipeline of several: its uid (its offsets and watermarks are kept
    under it), the stages that run on its records only (those called on its stream
    before ``union`` or ``connect``), its watermark strategy, and the input of a
    connected keyed function it feeds (``side`` 0, or 1: ``process_element2``, or
    ``BROADCAST_SIDE``: every subtask's ``process_broadcast_element``)."""

    source: Source
    uid: str
    stages: tuple[Stage, ...] = ()
    watermark_strategy: WatermarkStrategy | None = None
    side: int = 0


@dataclass(frozen=True, slots=True)
class TypedKey:
    """A key selector whose keys must be of ``key_type`` (``key_by(…, key_type=…)``):
    a key of another type fails the epoch with an error that names ``stream``."""

    selector: Callable[[Any], Any]
    key_type: type
    stream: str

    def __call__(self, record: Any) -> Any:
        key = self.selector(record)
        if not isinstance(key, self.key_type) or (
            isinstance(key, bool) and self.key_type is not bool
        ):
            raise TypeError(
                f"{self.stream}: key {key!r} is {type(key).__name__}, not "
                f"{self.key_type.__name__} as key_by(key_type=…) declares"
            )
        return key


def typed_key(selector: Callable[[Any], Any], key_type: type, stream: str) -> TypedKey:
    if isinstance(selector, TypedKey):
        return replace(selector, stream=stream)
    return TypedKey(selector, key_type, stream)


def check_unique_uids(job_id: str, inputs: tuple[SourceInput, ...], verb: str) -> None:
    """Each source has its own uid: its offsets and watermarks are kept under it."""
    seen: set[str] = set()
    for i in inputs:
        if i.uid in seen:
            raise ValueError(
                f"pipeline {job_id}: {verb} of two sources with the uid {i.uid!r}: "
                "give each source its own uid (.source(src, uid=…)), its offsets and "
                "watermarks are kept under it"
            )
        seen.add(i.uid)


def check_sources_of_several(
    job_id: str, merged: tuple[SourceInput, ...], pre_key_stages: tuple[Stage, ...]
) -> None:
    """Every source carries event time or none does; only per-record stages run before
    ``key_by`` (a dataframe stage needs the one source's whole epoch)."""
    timed = [i.uid for i in merged if i.watermark_strategy is not None]
    if timed and len(timed) != len(merged):
        untimed = [i.uid for i in merged if i.watermark_strategy is None]
        raise ValueError(
            f"pipeline {job_id}: sources {timed} carry event time and {untimed} "
            "do not: give every source a WatermarkStrategy (assign_timestamps)"
        )
    for i in merged:
        for stage in (*i.stages, *pre_key_stages):
            if isinstance(stage, DataFrameStage):
                raise ValueError(
                    f"pipeline {job_id}: dataframe stage {stage.name!r} runs before "
                    f"key_by on source {i.uid!r} of several; a pipeline of several sources "
                    "takes per-record stages there (dataframe stages go after process)"
                )


def check_function_kind(job_id: str, function: Any, inputs: tuple[SourceInput, ...]) -> None:
    """The first keyed function fits its inputs: a KeyedCoProcessFunction for two
    connected keyed streams, a KeyedBroadcastProcessFunction for a keyed stream connected
    to a broadcast one, and neither for one stream."""
    from sparkpoint.pipeline.api.broadcast import KeyedBroadcastProcessFunction
    from sparkpoint.pipeline.api.functions import KeyedCoProcessFunction

    sides = {i.side for i in inputs}
    connected, broadcast = 1 in sides, BROADCAST_SIDE in sides
    if connected and not isinstance(function, KeyedCoProcessFunction):
        raise TypeError(
            f"pipeline {job_id}: connected streams go into a KeyedCoProcessFunction "
            f"(process_element1/process_element2), not {type(function).__name__}"
        )
    if not connected and isinstance(function, KeyedCoProcessFunction):
        raise TypeError(
            f"pipeline {job_id}: {type(function).__name__} is a "
            "KeyedCoProcessFunction: it takes two streams, a.key_by(…).connect(b.key_by(…))"
        )
    if not broadcast and isinstance(function, KeyedBroadcastProcessFunction):
        raise TypeError(
            f"pipeline {job_id}: {type(function).__name__} is a KeyedBroadcastProcessFunction: "
            "it takes a keyed stream connected to a broadcast one, "
            "keyed.connect(stream.broadcast(MapStateDescriptor(…)))"
        )


def check_mergeable(into: Pipeline, stream: Pipeline, verb: str, which: str) -> None:
    """``stream`` (``which``) may be merged into ``into`` by ``verb``: a stream of
    sources of the same pipeline."""
    from sparkpoint.pipeline.api.builder import Pipeline

    job = into.job_id
    if not isinstance(stream, Pipeline):
        raise TypeError(f"pipeline {job}: {verb} takes pipelines, got {stream!r}")
    if stream.job_id != job or stream.parallelism != into.parallelism:
        raise ValueError(
            f"pipeline {job}: {verb} of streams of different pipelines "
            f"({stream.job_id!r} at parallelism {stream.parallelism}, "
            f"{job!r} at {into.parallelism}): build both from one Pipeline"
        )
    if not stream.inputs:
        raise ValueError(f"pipeline {job}: {verb}: {which} has no source")
    if stream.function is not None:
        raise ValueError(
            f"pipeline {job}: {verb} takes streams of sources; {which} has a "
            "keyed function already (only sources can be merged for now)"
        )


def folded_inputs(stream: Pipeline, side: int) -> tuple[SourceInput, ...]:
    """``stream``'s inputs with the stages called on it so far (and its watermark
    strategy) made their own, feeding ``side`` of a connected function."""
    return tuple(
        replace(
            i,
            stages=(*i.stages, *stream.pre_key_stages),
            watermark_strategy=i.watermark_strategy or stream.watermark_strategy,
            side=side,
        )
        for i in stream.inputs
    )


def merged_into(stream: Pipeline, inputs: tuple[SourceInput, ...], verb: str) -> Pipeline:
    """``stream`` made a stream of the sources ``inputs`` (not keyed yet)."""
    check_unique_uids(stream.job_id, inputs, verb)
    strategy = next((i.watermark_strategy for i in inputs if i.watermark_strategy), None)
    return replace(
        stream,
        source_op=None,
        merged=inputs,
        pre_key_stages=(),
        watermark_strategy=strategy,
        key_selector=None,
        key_type=None,
    )
