"""Leadership changes this replica has observed, for the UI's failover history.

Each replica watches leader/info (a ZooKeeper data watch, which also fires on every lease
renewal) and remembers every change of leader it sees, with how long the cluster had no
live leader: from the old leader's last lease renewal to the new leader's grant, both as
the leaders wrote them (so across machines it includes their clock difference). The
history is this replica's memory: a replica started later knows only what it has seen.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from sparkpoint.ha import LeaderInfo

#: How many changes a replica remembers.
MAX_CHANGES = 50


@dataclass(frozen=True, slots=True)
class _Seen:
    instance_id: str
    epoch: int
    since_ms: int
    renewed_ms: int


class LeadershipHistory:
    """Thread-safe; :meth:`observe` is cheap (it runs on the ZooKeeper event thread)."""

    def __init__(self, max_changes: int = MAX_CHANGES) -> None:
        self._lock = threading.Lock()
        self._changes: deque[dict[str, Any]] = deque(maxlen=max_changes)
        self._current: _Seen | None = None
        self._vacated: tuple[_Seen, int] | None = None  # (leader, when its info vanished)

    def observe(self, info: dict[str, Any] | None, now_ms: int | None = None) -> None:
        """Record what leader/info says now (``None``: no leader published)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if info is None:
                if self._current is not None:
                    self._vacated = (self._current, now)
                    self._current = None
                return
            seen = _Seen(
                str(info["instance_id"]),
                int(info["epoch"]),
                int(info.get("since_ms") or 0),
                int(info.get("renewed_ms") or info.get("since_ms") or 0),
            )
            current = self._current
            self._current = seen
            if current is not None and current.epoch == seen.epoch:
                return  # a renewal
            if current is None and self._vacated is None:
                self._add(seen, None, None, "leading when this replica started watching", now)
                return
            if current is not None:
                self._add(seen, current, current.renewed_ms, "took over (no renewal)", now)
            else:
                assert self._vacated is not None
                old, _gone_ms = self._vacated
                self._add(seen, old, old.renewed_ms, "handed over (released)", now)
            self._vacated = None

    def _add(
        self, new: _Seen, old: _Seen | None, last_renewal_ms: int | None, how: str, now: int
    ) -> None:
        took = None if last_renewal_ms is None else max(new.since_ms - last_renewal_ms, 0)
        self._changes.appendleft(
            {
                "observed_ms": now,
                "leader": new.instance_id,
                "term": new.epoch,
                "epoch": new.epoch,  # deprecated alias of "term"
                "since_ms": new.since_ms,
                "previous_leader": old.instance_id if old else None,
                "previous_term": old.epoch if old else None,
                "previous_epoch": old.epoch if old else None,  # deprecated alias
                "previous_last_renewal_ms": last_renewal_ms,
                "leaderless_ms": took,
                "how": how,
            }
        )

    def changes(self) -> list[dict[str, Any]]:
        """Newest first."""
        with self._lock:
            return list(self._changes)


def watch_leadership(backend: object) -> LeadershipHistory:
    """A history fed by a watch on leader/info when ``backend`` is ZooKeeper's (the
    embedded one has a single, local leader: the cluster page feeds it as it reads)."""
    from sparkpoint.ha import watch_leader_info
    from sparkpoint.service.backend import ZooKeeperBackend

    history = LeadershipHistory()
    if isinstance(backend, ZooKeeperBackend):

        def seen(info: LeaderInfo | None) -> None:
            history.observe(None if info is None else asdict(info))

        watch_leader_info(backend.conn, seen)
    return history
