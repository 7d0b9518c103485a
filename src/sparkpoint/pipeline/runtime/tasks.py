"""The executor plumbing of an epoch, one call per partition: read source ranges, key
records, pick an epoch's outputs apart, write them to the sink (phase one). Plain
picklable objects, so Spark ships them with their parameters and a retried task does
exactly the same. The keyed function and its state run in the backend's tasks
(pipeline/state/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sparkpoint.pipeline.api.event_time import MIN_WATERMARK, merge_maxima
from sparkpoint.pipeline.api.functions import SideOutput
from sparkpoint.pipeline.api.stages import RecordStage, run_record_stages
from sparkpoint.pipeline.runtime.records import Counts, NewState, Output, Result
from sparkpoint.pipeline.sinks.files import PendingFile, SinkWriter
from sparkpoint.pipeline.sources.base import EpochRange, SplitReader


@dataclass(frozen=True, slots=True)
class ReadTask:
    """Source ranges → ``(key, (order, record))``, or ``(order, record)`` without a
    ``key_selector`` (records that go through a DataFrame stage before they are keyed).
    The order is ``(split, position)``; ``stages`` (per-record, before key_by) add the
    index of each record they make from one source record: ``(split, position, n)``."""

    reader: SplitReader
    key_selector: Callable[[Any], Any] | None
    stages: tuple[RecordStage, ...] = ()
    #: Before each split's name in the order: ``<source uid>/`` in a pipeline of several
    #: sources (runtime/inputs.py), so splits of two sources never share a name.
    split_prefix: str = ""

    def __call__(self, ranges: Iterable[EpochRange]) -> Iterator[tuple[Any, Any]]:
        for split in ranges:
            name = self.split_prefix + split.split
            for position, record in self.reader.read(split):
                if self.stages:
                    outputs: Iterable[tuple[Any, Any]] = (
                        ((name, position, n), out)
                        for n, out in enumerate(run_record_stages(self.stages, record))
                    )
                else:
                    outputs = (((name, position), record),)
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


def _main_outputs(items: Iterable[Result]) -> Iterator[tuple[int, Any, Any]]:
    """``(n, timestamp, output)`` of an epoch's outputs, side outputs left out."""
    main = (
        (timestamp, value)
        for kind, timestamp, value in items
        if kind is Output and not isinstance(value, SideOutput)
    )
    for n, (timestamp, value) in enumerate(main):
        yield n, timestamp, value


def only_outputs(index: int, items: Iterable[Result]) -> Iterator[tuple[Any, Any]]:
    """An epoch's outputs as ``((partition, n), output)``: what stages after the keyed
    function take when one of them is a DataFrame stage."""
    for n, _, value in _main_outputs(items):
        yield (index, n), value


def timed_outputs(
    index: int, items: Iterable[Result]
) -> Iterator[tuple[tuple[int, int, int], Any]]:
    """An epoch's outputs as records of the next keyed stage: ``((timestamp, partition,
    n), output)`` — the order it processes them in (event time first), and the
    timestamp each carries (event_time.carried_timestamp)."""
    for n, timestamp, value in _main_outputs(items):
        yield (MIN_WATERMARK if timestamp is None else timestamp, index, n), value


@dataclass(frozen=True, slots=True)
class BranchOutputs:
    """A branch's last keyed stage's result → what goes to the sink: its outputs
    through its per-record ``stages`` as side outputs of the branch's sink ``tag``,
    and its own side outputs (api/branches.py)."""

    tag: str
    stages: tuple[Any, ...] = ()

    def __call__(self, items: Iterable[Result]) -> Iterator[Result]:
        for kind, timestamp, value in items:
            if kind is not Output:
                continue
            if isinstance(value, SideOutput):
                yield kind, timestamp, value
                continue
            for out in run_record_stages(self.stages, value):
                yield kind, timestamp, SideOutput(self.tag, out)


def only_side_outputs(items: Iterable[Result]) -> Iterator[Result]:
    for item in items:
        if item[0] is Output and isinstance(item[2], SideOutput):
            yield item


def without_counts(items: Iterable[Result]) -> Iterator[Result]:
    for item in items:
        if item[0] is not Counts:
            yield item


def only_counts(items: Iterable[Result]) -> Iterator[Result]:
    """An epoch's counts and side outputs: what goes to the sink beside the outputs of
    a DataFrame stage after the keyed function."""
    for item in items:
        if item[0] is Counts or (item[0] is Output and isinstance(item[2], SideOutput)):
            yield item


def only_state(items: Iterable[Result]) -> Iterator[tuple[Any, Any]]:
    """The next state RDD's ``(key, entry)`` pairs out of an epoch's result."""
    for kind, key, value in items:
        if kind is NewState:
            yield key, value


@dataclass(frozen=True, slots=True)
class SinkTask:
    """Writes one partition's outputs of an epoch (phase one of the sink), after the
    per-record ``stages`` after the keyed function, and reports ``(pending file or None,
    records processed)``."""

    writer: SinkWriter
    stages: tuple[RecordStage, ...] = ()

    def __call__(
        self, index: int, items: Iterable[Result]
    ) -> Iterator[tuple[PendingFile | None, int, dict[str, int]]]:
        outputs: list[Any] = []
        side: list[SideOutput] = []
        processed, maxima = 0, {}
        for kind, _, value in items:
            if kind is Output:
                if isinstance(value, SideOutput):
                    side.append(value)
                else:
                    outputs.extend(run_record_stages(self.stages, value))
            elif kind is Counts:
                processed += value[0]
                merge_maxima(maxima, value[1])
        if side and getattr(self.writer, "takes_side_outputs", False):
            outputs.extend(side)  # a routed sink's writer sends them to their sinks
        yield self.writer.write(index, outputs), processed, maxima
