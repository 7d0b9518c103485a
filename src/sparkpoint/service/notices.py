"""Heartbeat notices as the API shows them, numbered so they only rise across leaders.

A coordinator numbers its notices from 1. A driver that saw notice 57 of the old leader
must still get notice 1 of the new one, so the service adds a base to every number: the
leader epoch shifted left by 32 bits (a new term always numbers above the old), plus the
last number given out before a job's coordinator was replaced within the term.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sparkpoint.coordinator import AbortNotice, CompletionNotice, Notice, TriggerNotice

#: Checkpoints whose kind and stop flag are remembered for later completion/abort notices.
_REMEMBERED = 4096


def term_base(epoch: int) -> int:
    return epoch << 32


@dataclass(frozen=True, slots=True)
class _Known:
    kind: str
    stop: bool
    trigger_ms: int


class NoticeTranslator:
    """Turns one coordinator's notices into API notifications (thread-safe)."""

    def __init__(self, base: int) -> None:
        self.base = base
        self._known: OrderedDict[int, _Known] = OrderedDict()
        self._stops: set[int] = set()
        self._lock = threading.Lock()

    def mark_stop(self, checkpoint_id: int) -> None:
        with self._lock:
            self._stops.add(checkpoint_id)

    def to_local(self, after_seq: int) -> int:
        """The coordinator's own number to ask ``notifications_since`` for."""
        return max(after_seq - self.base, 0)

    def translate(self, notice: Notice, now_ms: int) -> dict[str, Any]:
        with self._lock:
            if isinstance(notice, TriggerNotice):
                known = _Known(
                    notice.kind.value, notice.checkpoint_id in self._stops, notice.timestamp_ms
                )
                self._known[notice.checkpoint_id] = known
                while len(self._known) > _REMEMBERED:
                    self._known.popitem(last=False)
            known_or_none = self._known.get(notice.checkpoint_id)
        known = known_or_none or _Known("checkpoint", False, now_ms)
        out: dict[str, Any] = {
            "seq": self.base + notice.seq,
            "checkpoint_id": notice.checkpoint_id,
            "kind": known.kind,
            "timestamp_ms": known.trigger_ms,
            "reason": None,
            "stop": known.stop,
            "directory": None,
            "metadata_uri": None,
        }
        if isinstance(notice, TriggerNotice):
            out.update(type="trigger", directory=notice.directory)
        elif isinstance(notice, CompletionNotice):
            out.update(type="complete", kind=notice.kind.value, metadata_uri=notice.metadata_uri)
        elif isinstance(notice, AbortNotice):
            out.update(type="abort", reason=notice.reason)
        return out
