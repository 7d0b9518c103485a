"""The Nexmark stream as the queries read it: event files, bids, event time, watermarks.

The files hold one event a line as the ``nexmark`` crate writes them — ``{"Person":
{…}}``, ``{"Auction": {…}}`` or ``{"Bid": {…}}``, times in ms since the epoch under
``date_time`` — one file per split (``python -m sparkpoint.ops.devcluster.nexmark``).
Event time is ``date_time``, with the suite's watermark: ``WATERMARK FOR dateTime AS
dateTime - INTERVAL '4' SECOND``. Days, hours and minutes are those of UTC.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sparkpoint.pipeline import FileSource, Pipeline, WatermarkStrategy

#: The suite's bounded out-of-orderness.
OUT_OF_ORDERNESS_MS = 4_000
DAY_MS = 86_400_000
#: q13's side input beside the events (written with them; a name the source skips).
SIDE_INPUT = "_side_input.csv"

Bid = dict[str, Any]


def event_time(record: dict[str, Any]) -> int:
    return int(record["date_time"])


def bids(event: dict[str, Any]) -> list[Bid]:
    """The bid an event is, or none (the suite's ``bid`` view)."""
    bid = event.get("Bid")
    return [] if bid is None else [bid]


def suite_watermarks(timestamp: Callable[[Any], int] = event_time) -> WatermarkStrategy:
    """Event time ``timestamp(record)`` of each record as it is keyed (``date_time`` of a
    bid), watermarks the suite's out-of-orderness behind it."""
    return WatermarkStrategy(timestamp, max_out_of_orderness_ms=OUT_OF_ORDERNESS_MS)


def bid_stream(
    job_id: str, events_dir: str, *, parallelism: int = 4, bytes_per_epoch: int = 4 << 20
) -> Pipeline:
    """The bids of the event files under ``events_dir``, with event time: every query
    over bids alone starts here. ``bytes_per_epoch``: how much of each file an epoch
    reads. The files are the whole input, so the stream ends after them."""
    source = FileSource(events_dir, bounded=True, max_bytes_per_split=bytes_per_epoch)
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(source, uid="events")
        .flat_map(bids, name="bids")
        .assign_timestamps(suite_watermarks())
    )


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
