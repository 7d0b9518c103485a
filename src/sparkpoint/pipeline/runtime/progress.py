"""What the driver reports of its pipeline with each heartbeat: the epoch, the records so
far, a recent rate, and the source's lag when the source can tell (the UI's Jobs page)."""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

log = logging.getLogger(__name__)

#: The rate is taken over about this many seconds of samples.
RATE_WINDOW_S = 10.0


class ProgressMeter:
    """Samples (time, records) at each heartbeat and reports a recent records/s.

    >>> meter = ProgressMeter()
    >>> meter.report(epoch=1, records=0, now=100.0)["records_per_s"]
    0.0
    >>> meter.report(epoch=3, records=500, now=105.0)["records_per_s"]
    100.0
    """

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()

    def report_of(self, status: Any, source: Any) -> dict[str, Any]:
        """The report for a driver's ``status`` (epoch, records) and its ``source``: a
        source with a ``lag()`` method says how much waits in it."""
        lag = getattr(source, "lag", None)
        try:
            source_lag = lag() if callable(lag) else None
        except Exception as exc:  # the figure is optional: never let it stop the loop
            log.debug("source lag unavailable: %s", exc)
            source_lag = None
        return self.report(epoch=status.epoch, records=status.records, source_lag=source_lag)

    def report(
        self, *, epoch: int, records: int, source_lag: int | None = None, now: float | None = None
    ) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        if self._samples and records < self._samples[-1][1]:
            self._samples.clear()  # a new count (a restarted run)
        self._samples.append((now, records))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()
        (t0, r0), (t1, r1) = self._samples[0], self._samples[-1]
        rate = (r1 - r0) / (t1 - t0) if t1 > t0 else 0.0
        return {
            "epoch": epoch,
            "records": records,
            "records_per_s": round(rate, 1),
            "source_lag": source_lag,
        }
