"""The source seam: the driver plans offset ranges, executors read them.

A source is driver-side bookkeeping (which splits exist, where each stands) plus a
picklable :class:`SplitReader` that turns one :class:`EpochRange` into records on an
executor. Reading a range twice gives the same records in the same order, which is
what lets Spark recompute a lost partition and a restored job replay an epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class EpochRange:
    """Records of ``split`` from offset ``start`` (inclusive) to ``end`` (exclusive)."""

    split: str
    start: int
    end: int


class SplitReader(Protocol):
    def read(self, split: EpochRange) -> Iterator[tuple[int, Any]]:
        """``(position, record)`` pairs of the range, in order."""
        ...


class Source(Protocol):
    """Driver side of a source. Offsets are kept as SPLIT_DISTRIBUTE operator state,
    one element per split."""

    def restore(self, offsets: dict[str, int]) -> None:
        """Continue from ``offsets`` (split → next position); splits not named start at 0."""

    def plan_epoch(self) -> list[EpochRange]:
        """The ranges of the next epoch (at most one per split); empty when nothing new."""
        ...

    def advance(self, ranges: list[EpochRange]) -> None:
        """The epoch of ``ranges`` ran: move the offsets past them."""

    def offsets(self) -> dict[str, int]:
        """Next position of every known split."""
        ...

    @property
    def exhausted(self) -> bool:
        """A bounded source has no more records, ever."""
        ...

    def reader(self) -> SplitReader:
        """The picklable object executors read ranges with."""
        ...

    def snapshot_state(self, checkpoint_id: int) -> None:
        """A checkpoint is taken now, after the epoch just run (before ``offsets()``)."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete (a queue source acknowledges now)."""

    def close(self) -> None:
        """The job is gone: close every client of the driver side (a client left behind
        keeps reconnecting to a server that may be gone, and another program may listen
        on its port by then). Idempotent; a later call reopens what it needs."""


class OffsetSource:
    """An offset-based source: ``_offsets`` (split → next offset) is its whole position,
    moved on by the epochs that ran; the checkpoint hooks have nothing to do."""

    _offsets: dict[str, int]

    def advance(self, ranges: list[EpochRange]) -> None:
        for r in ranges:
            self._offsets[r.split] = r.end

    def offsets(self) -> dict[str, int]:
        return dict(self._offsets)

    def snapshot_state(self, checkpoint_id: int) -> None:
        """Nothing to do: offsets are read by ``offsets()``."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Nothing to acknowledge: a replayable source keeps its records."""

    def close(self) -> None:
        """Nothing to close unless the source holds clients."""
