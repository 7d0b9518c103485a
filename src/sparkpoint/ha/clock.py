"""The clock leases are measured on.

A leader may act until its lease deadline, and a follower takes over once the leader has
been silent for the takeover timeout; both are durations on the local clock. The
monotonic clock (``CLOCK_MONOTONIC``) stops while the host is suspended, so a leader
woken from a suspend would believe its lease had only run on by the time it was awake —
and act on it for up to a renewal interval while another replica already leads.
``CLOCK_BOOTTIME`` is monotonic too and also counts the time suspended: a woken leader
finds its lease over and stops. Where the platform has no such clock the monotonic one
is used, and docs/ha.md says what is then assumed (hosts are not suspended).
"""

from __future__ import annotations

import time

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def lease_clock() -> float:
    """Seconds on a monotonic clock that keeps counting while the host is suspended."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, for the times leader/info shows people (never for
    measuring a lease)."""
    return int(time.time() * 1000)
