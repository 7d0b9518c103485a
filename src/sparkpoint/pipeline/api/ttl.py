"""State time-to-live: the setting a keyed-state descriptor takes, how a value stored
under it is kept, and the cleanup a snapshot does (docs/pipeline.md, "State TTL") — as
Flink's ``StateTtlConfig`` and Spark's TTL of ``transformWithState``.

Time is processing time: the backend's ``processing_time_ms``, one instant per epoch, so
a retried task sees the same state. A value stored under a TTL is a :class:`TtlValue`,
its last access and the TTL it was stored under beside it — a ValueState's value, a
ListState's whole list, each value of a MapState — so the snapshot tasks, which know
nothing of descriptors, can tell what has expired. The views (keyed_state.py) never
return an expired value; a snapshot leaves it out (:func:`drop_expired`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from sparkpoint.pipeline.state import pickles

#: When an access restarts a value's time to live.
UPDATE_ON = ("write", "read_and_write")


@dataclass(frozen=True, slots=True)
class StateTtlConfig:
    """A value expires ``ttl_ms`` of processing time after its last write
    (``update_on="write"``) or its last read or write (``"read_and_write"``)."""

    ttl_ms: int
    update_on: Literal["write", "read_and_write"] = "write"

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms <= 0:
            raise ValueError(f"state TTL ttl_ms={self.ttl_ms!r} must be a positive int (ms)")
        if self.update_on not in UPDATE_ON:
            raise ValueError(
                f"state TTL update_on={self.update_on!r} must be one of {', '.join(UPDATE_ON)}"
            )

    @property
    def refreshed_on_read(self) -> bool:
        return self.update_on == "read_and_write"


@dataclass(frozen=True, slots=True)
class TtlValue:
    """A stored value, the processing time of its last access and the TTL it was stored
    under (what a snapshot goes by: it has no descriptors)."""

    value: Any
    timestamp_ms: int
    ttl_ms: int

    def expired(self, now_ms: int, declared: StateTtlConfig | None = None) -> bool:
        """Expired at ``now_ms``: under its own TTL, or the declared one when shorter (a
        TTL shortened on restore applies at once; a longer one from the next access)."""
        ttl = self.ttl_ms if declared is None else min(self.ttl_ms, declared.ttl_ms)
        return now_ms >= self.timestamp_ms + ttl


def unwrap(stored: Any) -> Any:
    """The value as the function sees it: a TtlValue's value, each of a map's values."""
    if isinstance(stored, TtlValue):
        return stored.value
    if isinstance(stored, dict) and any(isinstance(v, TtlValue) for v in stored.values()):
        return {k: v.value if isinstance(v, TtlValue) else v for k, v in stored.items()}
    return stored


def drop_expired(entry: dict[str, Any], now_ms: int) -> dict[str, Any] | None:
    """One key's ``{state name → value}`` without what has expired at ``now_ms`` (None:
    nothing left); ``entry`` itself is not changed (it is returned when nothing expired)."""
    live: dict[str, Any] | None = None  # a copy, made at the first change
    for name, stored in entry.items():
        kept = _live_part(stored, now_ms)
        if kept is stored:
            continue
        if live is None:
            live = dict(entry)
        if kept is _MISSING:
            del live[name]
        else:
            live[name] = kept
    if live is None:
        return entry or None
    return live or None


def _live_part(stored: Any, now_ms: int) -> Any:
    """``stored`` without its expired values: itself when none expired, ``_MISSING`` when
    all did."""
    if isinstance(stored, TtlValue):
        return _MISSING if stored.expired(now_ms) else stored
    if isinstance(stored, dict):  # a MapState: each value on its own
        kept = {
            k: v for k, v in stored.items() if not (isinstance(v, TtlValue) and v.expired(now_ms))
        }
        if len(kept) == len(stored):
            return stored
        return kept or _MISSING
    return stored


def live_store_entries(
    entries: Iterable[tuple[int, bytes, bytes]], now_ms: int
) -> Iterator[tuple[int, bytes, bytes]]:
    """``(key group, key bytes, pickled entry)`` without what has expired at ``now_ms``;
    an entry whose pickle holds no TtlValue is passed on as it is, unread."""
    for group, key_bytes, pickled in entries:
        if _PICKLED_NAME not in pickled:
            yield group, key_bytes, pickled
            continue
        entry = pickles.loads(pickled)
        live = drop_expired(entry, now_ms)
        if live is entry:
            yield group, key_bytes, pickled
        elif live is not None:
            yield group, key_bytes, pickles.dumps(live)


def now_ms() -> int:
    """Wall-clock milliseconds: a backend's processing time when none is given, and the
    instant a snapshot's cleanup goes by (expired state is never returned anyway, so a
    snapshot taken a little earlier or later only keeps or drops invisible values)."""
    return time.time_ns() // 1_000_000


_MISSING = object()
#: Every pickle holding a TtlValue names its class.
_PICKLED_NAME = TtlValue.__qualname__.encode()
