"""Timers: per key, in event time and processing time, kept in keyed state.

A key's timers are one more entry of its keyed state (the reserved state name
``_timers``: a sorted list of ``(timestamp, domain)``), so they live in the key's key
group: a checkpoint holds them, a restore and a rescale move them with the key, and a
state read shows them. An epoch fires, before its records, every timer its watermark
(event time) or its processing time has passed, in timestamp order (ties: event time
first, then by key), each exactly once: the firing, the timer's removal and what
``on_timer`` emits belong to the same epoch, which a checkpoint either covers whole or
replays whole. Timers an ``on_timer`` registers that are already due fire in the same
pass.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any

from sparkpoint.pipeline.api.keyed_state import TIMERS
from sparkpoint.statefiles.keys import Key, canonical_key_bytes

#: Time domains, in the order timers with equal timestamps fire.
EVENT_TIME, PROCESSING_TIME = 0, 1
DOMAIN_NAMES = {EVENT_TIME: "event time", PROCESSING_TIME: "processing time"}

Timer = tuple[int, int]  # (timestamp, domain)


def timers_of(entry: dict[str, Any] | None) -> tuple[Timer, ...]:
    if not entry:
        return ()
    return tuple(entry.get(TIMERS, ()))


def _check_timestamp(ts: Any) -> int:
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise TypeError(f"a timer's timestamp must be an int of milliseconds, got {ts!r}")
    return ts


class TimerService:
    """The timers of one subtask during one epoch: registration against the current
    key's state, and the queue of due timers."""

    def __init__(self, backend: Any, processing_time_ms: int, watermark: int) -> None:
        self._backend = backend
        self.processing_time_ms = processing_time_ms
        self.watermark = watermark
        self._due: list[tuple[int, int, bytes, Key]] = []

    def register(self, domain: int, ts: Any) -> None:
        timer = (_check_timestamp(ts), domain)
        found = self._backend.get_or_none(TIMERS)
        current = list(found or ())
        if timer in current:
            return
        current.append(timer)
        current.sort()
        self._backend.put(TIMERS, current)
        if self._is_due(timer):
            key = self._backend.current_key
            heapq.heappush(self._due, (timer[0], domain, canonical_key_bytes(key), key))

    def delete(self, domain: int, ts: Any) -> None:
        timer = (_check_timestamp(ts), domain)
        current = [t for t in self._backend.get_or_none(TIMERS) or () if t != timer]
        if current:
            self._backend.put(TIMERS, current)
        else:
            self._backend.remove(TIMERS)

    def _is_due(self, timer: Timer) -> bool:
        ts, domain = timer
        limit = self.watermark if domain == EVENT_TIME else self.processing_time_ms
        return ts <= limit

    def collect_due(self, entries: Iterable[tuple[Key, dict[str, Any]]]) -> None:
        """Queue every due timer of these entries (a scan of the keys that have any)."""
        for key, entry in entries:
            timers = entry.get(TIMERS)
            if not timers:
                continue
            key_bytes = None
            for timer in timers:
                if self._is_due(timer):
                    key_bytes = key_bytes or canonical_key_bytes(key)
                    heapq.heappush(self._due, (timer[0], timer[1], key_bytes, key))

    def pop_due(self) -> Iterator[tuple[Key, int, int]]:
        """``(key, timestamp, domain)`` in firing order, each removed from its key's
        timers as it is handed out (one deleted meanwhile is skipped)."""
        while self._due:
            ts, domain, _, key = heapq.heappop(self._due)
            self._backend.set_current_key(key)
            current = self._backend.get_or_none(TIMERS) or ()
            if (ts, domain) not in current:
                continue  # deleted by an earlier timer of this pass
            self.delete(domain, ts)
            yield key, ts, domain
