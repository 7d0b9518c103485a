"""Several sinks behind the pipeline's one sink operator: the main outputs go to the
main sink, each side output (``ctx.output(tag, value)``) to the sink given for its tag
(``Pipeline.side_output``). Every sink keeps its own two-phase protocol; their
transactions are one checkpoint's, committed together, and restored together from the
sink operator's state, each element tagged with the sink it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sparkpoint.pipeline.api.functions import SideOutput
from sparkpoint.pipeline.sinks.base import Sink
from sparkpoint.pipeline.state import pickles


@dataclass(frozen=True, slots=True)
class RoutedWriter:
    """The executor side: one writer per sink, outputs split by tag."""

    writers: tuple[Any, ...]
    tags: tuple[str | None, ...]
    #: SinkTask hands a writer side outputs only when it says it takes them.
    takes_side_outputs: bool = True

    def write(self, partition: int, outputs: Iterable[Any]) -> tuple[Any, ...] | None:
        by_tag: dict[str | None, list[Any]] = {tag: [] for tag in self.tags}
        for value in outputs:
            if isinstance(value, SideOutput):
                if value.tag in by_tag:  # a side output nobody takes is dropped
                    by_tag[value.tag].append(value.value)
            else:
                by_tag[None].append(value)
        written = tuple(
            w.write(partition, by_tag[t]) for w, t in zip(self.writers, self.tags, strict=True)
        )
        return None if all(w is None for w in written) else written


class RoutedSink:
    """The driver side; ``sinks[0]`` is the main sink (tag None)."""

    def __init__(self, main: Sink, side: tuple[tuple[str, Sink], ...]) -> None:
        self.tags: tuple[str | None, ...] = (None, *(tag for tag, _ in side))
        self.sinks: tuple[Sink, ...] = (main, *(sink for _, sink in side))

    def bind(self, job_id: str, operator_uid: str) -> None:
        for tag, sink in zip(self.tags, self.sinks, strict=True):
            sink.bind(job_id, operator_uid if tag is None else f"{operator_uid}.{tag}")

    def writer(self, process_tag: str, epoch: int) -> RoutedWriter:
        return RoutedWriter(tuple(s.writer(process_tag, epoch) for s in self.sinks), self.tags)

    def epoch_written(self, outputs: Iterable[Any]) -> None:
        per_sink: list[list[Any]] = [[] for _ in self.sinks]
        for written in outputs:
            for n, one in enumerate(written):
                if one is not None:
                    per_sink[n].append(one)
        for sink, written in zip(self.sinks, per_sink, strict=True):
            sink.epoch_written(written)

    def pre_commit(self, checkpoint_id: int) -> None:
        for sink in self.sinks:
            sink.pre_commit(checkpoint_id)

    def snapshot(self, parallelism: int) -> list[list[bytes]]:
        parts: list[list[bytes]] = [[] for _ in range(parallelism)]
        for n, sink in enumerate(self.sinks):
            for i, elements in enumerate(sink.snapshot(parallelism)):
                parts[i].extend(pickles.dumps((n, e)) for e in elements)
        return parts

    def commit_up_to(self, checkpoint_id: int) -> int:
        return sum(sink.commit_up_to(checkpoint_id) for sink in self.sinks)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()

    def restore(self, elements: Iterable[bytes]) -> None:
        per_sink: list[list[bytes]] = [[] for _ in self.sinks]
        for element in elements:
            n, inner = _routed(element)
            if n < len(per_sink):  # a side sink removed since the checkpoint: dropped
                per_sink[n].append(inner)
        for sink, inner in zip(self.sinks, per_sink, strict=True):
            sink.restore(inner)


def _routed(element: bytes) -> tuple[int, bytes]:
    """``(sink number, element)``; an element of a checkpoint taken before the pipeline
    had side outputs is the main sink's."""
    try:
        loaded = pickles.loads(element)
    except Exception:  # not ours: another sink's own encoding
        return 0, element
    if (
        isinstance(loaded, tuple)
        and len(loaded) == 2
        and isinstance(loaded[0], int)
        and isinstance(loaded[1], bytes)
    ):
        return loaded
    return 0, element
