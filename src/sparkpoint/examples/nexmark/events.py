"""The Nexmark stream as the queries read it: event files, streams of persons, auctions
and bids, event time, watermarks.

The files hold one event a line as the ``nexmark`` crate writes them — ``{"Person":
{…}}``, ``{"Auction": {…}}`` or ``{"Bid": {…}}``, times in ms since the epoch under
``date_time`` — one file per split (``python -m sparkpoint.ops.devcluster.nexmark``).
Event time is ``date_time``, with the suite's watermark: ``WATERMARK FOR dateTime AS
dateTime - INTERVAL '4' SECOND``. Days, hours and minutes are those of UTC.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.pipeline import FileSource, Pipeline, WatermarkStrategy

#: The suite's bounded out-of-orderness.
OUT_OF_ORDERNESS_MS = 4_000
DAY_MS = 86_400_000
#: q13's side input beside the events (written with them; a name the source skips).
SIDE_INPUT = "_side_input.csv"

Bid = dict[str, Any]
#: An event of any kind, as the crate writes it inside its wrapper.
Event = dict[str, Any]
#: The wrapper of each kind of event in the files, by the name of the suite's view.
KINDS = {"persons": "Person", "auctions": "Auction", "bids": "Bid"}


def event_time(record: dict[str, Any]) -> int:
    return int(record["date_time"])


@dataclass(frozen=True)
class OfKind:
    """The event an event line is when it is of ``kind`` (``Person``, ``Auction`` or
    ``Bid``), or none: the suite's ``person``, ``auction`` and ``bid`` views."""

    kind: str

    def __call__(self, event: dict[str, Any]) -> list[Event]:
        inner = event.get(self.kind)
        return [] if inner is None else [inner]


def suite_watermarks(timestamp: Callable[[Any], int] = event_time) -> WatermarkStrategy:
    """Event time ``timestamp(record)`` of each record as it is keyed (``date_time`` of a
    bid), watermarks the suite's out-of-orderness behind it."""
    return WatermarkStrategy(timestamp, max_out_of_orderness_ms=OUT_OF_ORDERNESS_MS)


def bid_stream(
    job_id: str, events_dir: str, *, parallelism: int = 4, bytes_per_epoch: int = 4 << 20
) -> Pipeline:
    """The bids of the event files under ``events_dir``, with event time: every query
    over bids alone starts here. The files are the whole input, so the stream ends after
    them."""
    return EventFiles(job_id, events_dir, parallelism, bytes_per_epoch).bids()


@dataclass(frozen=True)
class EventFiles:
    """The event files under ``directory``, read by the streams of one pipeline: each
    stream is a source of its own over all the files (its uid the kind it keeps), so a
    query that joins two kinds reads the files twice. ``bytes_per_epoch``: how much of
    each file an epoch reads."""

    job_id: str
    directory: str
    parallelism: int = 4
    bytes_per_epoch: int = 4 << 20

    def stream(self, kind: str, *, uid: str | None = None) -> Pipeline:
        """The events of ``kind`` (``persons``, ``auctions``, ``bids``), with event time
        (``date_time``) and the suite's watermark."""
        if kind not in KINDS:
            raise ValueError(f"no events of kind {kind!r}: the kinds are {', '.join(KINDS)}")
        source = FileSource(self.directory, bounded=True, max_bytes_per_split=self.bytes_per_epoch)
        return (
            Pipeline(self.job_id, parallelism=self.parallelism)
            .source(source, uid=uid or kind)
            .flat_map(OfKind(KINDS[kind]), name=kind)
            .assign_timestamps(suite_watermarks())
        )

    def bids(self) -> Pipeline:
        """The bids alone: the source of the queries over bids keeps the uid ``events``."""
        return self.stream("bids", uid="events")


def day_of(ms: int) -> str:
    """``DATE_FORMAT(dateTime, 'yyyy-MM-dd')``."""
    return time.strftime("%Y-%m-%d", time.gmtime(ms // 1000))


def minute_of(ms: int) -> str:
    """``DATE_FORMAT(dateTime, 'HH:mm')``."""
    return time.strftime("%H:%M", time.gmtime(ms // 1000))


def hour_of(ms: int) -> int:
    """``HOUR(dateTime)``."""
    return ms // 3_600_000 % 24


def in_euros(price: int) -> str:
    """``0.908 * price`` as the suite's ``DECIMAL(23, 3)``, exactly: dollars to euros."""
    thousandths = price * 908
    return f"{thousandths // 1000}.{thousandths % 1000:03d}"
