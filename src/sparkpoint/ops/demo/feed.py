"""What the connector demos share: the orders example's messages published at a steady
rate with a poison message now and then, and the exactly-once verdict at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

KEYS = 50
#: Every this many messages one poison message (an undecodable body) is published.
POISON_EVERY = 500


class Verdict(Protocol):
    ok: bool
    rows: int
    missing: Any
    duplicated: Any

    def summary(self) -> str: ...


@dataclass
class OrdersFeed:
    """Subclasses start their servers, publish through :meth:`_paced`, count the rows the
    sink committed, and judge with :meth:`_judge`."""

    directory: Path
    rate_per_s: float = 100.0
    published: int = 0
    poisoned: int = 0
    verification: dict[str, Any] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    #: How long stopping waits for the publisher to deliver what it sent.
    publisher_join_s: ClassVar[float] = 30.0

    def start_publisher(self) -> None:
        self._thread = threading.Thread(target=self._publish, name="publisher", daemon=True)
        self._thread.start()

    def stop_publisher(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.publisher_join_s)

    def drained(self) -> bool:
        """Every published message has a committed row (or more: the check says)."""
        return self.rows() >= self.published

    def rows(self) -> int:
        raise NotImplementedError

    def _publish(self) -> None:
        raise NotImplementedError

    def _paced(
        self,
        poison: Callable[[int], None],
        send: Callable[[int], None],
        tick: Callable[[], None],
    ) -> None:
        """Until stopped: message ``n`` through ``send(n)`` as the rate makes it due, a
        poison one through ``poison(k)`` every POISON_EVERY, ``tick()`` between rounds."""
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate_per_s)
            while self.published < due and not self._stop.is_set():
                if (self.published + self.poisoned) % POISON_EVERY == POISON_EVERY - 1:
                    poison(self.poisoned)
                    self.poisoned += 1
                    continue
                send(self.published)
                self.published += 1
            tick()

    def _judge(self, result: Verdict, dead_lettered: int) -> bool:
        ok = result.ok and dead_lettered == self.poisoned
        self.verification = {
            "ok": ok,
            "summary": result.summary(),
            "published": self.published,
            "rows": result.rows,
            "missing": len(result.missing),
            "duplicated": len(result.duplicated),
            "poisoned": self.poisoned,
            "dead_lettered": dead_lettered,
        }
        return ok
