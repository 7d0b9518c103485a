"""A pipeline's sources as the driver's loop sees them (docs/pipeline.md, "Several
sources"): one or more, each with its own uid, offsets, splits and watermarks.

With one source nothing changes: its ranges and split names are its own. With several,
a split is named ``<source uid>/<split>`` wherever the pipeline keeps it (the records'
order, the watermark tracker), so two sources may have splits of the same name; in a
checkpoint each source's offsets and event-time maxima are operator state under its own
uid, with the split names it knows. Each record of a pipeline of several sources reaches
the keyed function as an :class:`InputRecord` that carries the input it came from (which
``process_element`` of a connected function) and its event time, read by its source's
watermark strategy. A broadcast stream's record goes to every subtask: one copy per
subtask, keyed by the subtask's ``Slot`` (:class:`BroadcastTask`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.event_time import WatermarkStrategy
from sparkpoint.pipeline.api.several_sources import BROADCAST_SIDE
from sparkpoint.pipeline.runtime.partitioner import Slot

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.several_sources import SourceInput
    from sparkpoint.pipeline.sources.base import SplitReader

#: Between a source's uid and its split's name (uids never contain it).
SPLIT_OF_SOURCE = "/"


@dataclass(frozen=True, slots=True)
class InputRecord:
    """A record of a pipeline of several sources, beside the input it feeds (``side``
    1: a connected function's ``process_element2``) and its event time (None without
    event time)."""

    side: int
    timestamp: int | None
    record: Any


@dataclass(frozen=True, slots=True)
class InputTask:
    """``(key, (order, record))`` → ``(key, (order, InputRecord))`` for one source."""

    side: int
    strategy: WatermarkStrategy | None

    def __call__(self, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        for key, (order, record) in items:
            ts = None if self.strategy is None else self.strategy.timestamp_of(record)
            yield key, (order, InputRecord(self.side, ts, record))


@dataclass(frozen=True, slots=True)
class BroadcastTask:
    """``(order, record)`` of a broadcast stream → ``(Slot(i), (order, InputRecord))``
    for every subtask ``i``: the partitioner sends each copy to its subtask."""

    parallelism: int
    strategy: WatermarkStrategy | None

    def __call__(self, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        for order, record in items:
            ts = None if self.strategy is None else self.strategy.timestamp_of(record)
            element = InputRecord(BROADCAST_SIDE, ts, record)
            for index in range(self.parallelism):
                yield Slot(index), (order, element)


@dataclass(frozen=True, slots=True)
class InputRange:
    """A source's range of an epoch: ``input`` (the source's place in the pipeline) and
    ``split``, the split's name as the pipeline keeps it."""

    input: int
    range: Any
    split: str


class SourceGroup:
    """The driver side of every source of a pipeline, in the order of its inputs."""

    def __init__(self, inputs: Sequence[SourceInput]) -> None:
        self.inputs = tuple(inputs)
        self.several = len(self.inputs) > 1

    def split_name(self, input: int, split: str) -> str:
        if not self.several:
            return split
        return f"{self.inputs[input].uid}{SPLIT_OF_SOURCE}{split}"

    def prefix(self, input: int) -> str:
        return self.split_name(input, "")

    def plan_epoch(self) -> list[InputRange]:
        return [
            InputRange(n, r, self.split_name(n, r.split))
            for n, i in enumerate(self.inputs)
            for r in i.source.plan_epoch()
        ]

    def advance(self, ranges: list[InputRange]) -> None:
        for n, i in enumerate(self.inputs):
            i.source.advance([r.range for r in ranges if r.input == n])

    @property
    def exhausted(self) -> bool:
        return all(i.source.exhausted for i in self.inputs)

    def ended(self) -> tuple[str, ...]:
        """The split-name prefixes of the sources of several that have ended."""
        if not self.several:
            return ()
        return tuple(self.prefix(n) for n, i in enumerate(self.inputs) if i.source.exhausted)

    def readers(self) -> tuple[SplitReader, ...]:
        return tuple(i.source.reader() for i in self.inputs)

    def snapshot_state(self, checkpoint_id: int) -> None:
        for i in self.inputs:
            i.source.snapshot_state(checkpoint_id)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for i in self.inputs:
            i.source.notify_checkpoint_complete(checkpoint_id)

    def lag(self) -> int | None:
        """The records waiting in the sources that can tell (None: none can)."""
        lags = [getattr(i.source, "lag", None) for i in self.inputs]
        known = [f() for f in lags if callable(f)]
        known = [n for n in known if n is not None]
        return sum(known) if known else None

    def watermarks_of(self, input: int, elements: Iterable[tuple[str, int]]) -> list[Any]:
        """The watermark tracker's elements kept under source ``input``'s uid: the
        pipeline's watermarks (names without a split: ``""``, ``#n``) and its own
        splits' maxima, under the split names the source knows."""
        if not self.several:
            return list(elements)
        prefix = self.prefix(input)
        return [
            (split.removeprefix(prefix), ts)
            for split, ts in elements
            if split == "" or split.startswith("#") or split.startswith(prefix)
        ]

    def restored_watermarks(self, input: int, elements: Iterable[tuple[str, int]]) -> list[Any]:
        """:meth:`watermarks_of` back: source ``input``'s elements as the tracker names them."""
        if not self.several:
            return list(elements)
        return [
            (split if split == "" or split.startswith("#") else self.split_name(input, split), ts)
            for split, ts in elements
        ]

    def close(self) -> None:
        """Closes every source, even when one fails (the first failure is raised)."""
        failure: BaseException | None = None
        for i in self.inputs:
            try:
                i.source.close()
            except BaseException as exc:  # the others are closed first
                failure = failure or exc
        if failure is not None:
            raise failure
