"""Watching the leader's lease from a follower (DESIGN.md section 3, leases).

The leader renews leader/info every renewal interval. A follower that sees no renewal
for the takeover timeout, on its own monotonic clock, may take over by a compare-and-set
on leader/epoch from the version it saw — so at most one follower wins, and a leader that
renewed after all keeps its epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from sparkpoint.ha import translate
from sparkpoint.ha.connection import ZooKeeperConnection
from sparkpoint.ha.leader_info import LeaderInfo


@dataclass(frozen=True, slots=True)
class LeaseView:
    """What a follower makes of the lease right now."""

    epoch: int | None  # the epoch version seen: the takeover CAS compares against it
    leader_id: str | None  # the leader whose lease is current or lapsed; None: no leader
    silent_for: float  # seconds since the lease last changed, on this follower's clock
    live: bool  # a leader holds the current epoch and renewed within the takeover timeout


class LeaseWatch:
    def __init__(self, takeover_timeout_s: float, renew_interval_s: float) -> None:
        self.takeover_timeout_s = takeover_timeout_s
        self.renew_interval_s = renew_interval_s
        self._observed: tuple[object, ...] | None = None
        self._observed_at = 0.0

    def look(self, conn: ZooKeeperConnection, wake: Callable[..., None]) -> LeaseView:
        """Read leader/info and the epoch; ``wake`` is called when leader/info changes."""
        paths = conn.paths
        with translate.reads("reading the leader lease"):
            try:
                raw, _ = conn.retry(conn.client.get, paths.leader_info)
            except NoNodeError:
                raw = None
            epoch_stat = conn.retry(conn.client.exists, paths.epoch)
            conn.client.exists(paths.leader_info, watch=wake)
        epoch = epoch_stat.version if epoch_stat is not None else None
        info = LeaderInfo.from_bytes(raw) if raw else None
        return self.observe(info, epoch, time.monotonic())

    def observe(self, info: LeaderInfo | None, epoch: int | None, now: float) -> LeaseView:
        current = info if info is not None and info.epoch == epoch else None
        observed = (
            (current.instance_id, current.epoch, current.renewals) if current else ("-", epoch)
        )
        if observed != self._observed:
            self._observed, self._observed_at = observed, now
        silent_for = now - self._observed_at
        return LeaseView(
            epoch=epoch,
            leader_id=current.instance_id if current else None,
            silent_for=silent_for,
            live=current is not None and silent_for < self.takeover_timeout_s,
        )

    def may_take_over(self, view: LeaseView, rank: int) -> bool:
        """Whether the follower ``rank``-th in line (the silent leader left out) goes now.

        The first goes first; each one behind gives those ahead a renewal interval's head
        start, so they rarely collide (and the epoch CAS makes a collision harmless). A
        leader that just won the epoch publishes its info one round trip later, so even
        "no leader at all" waits a moment before counting as such.
        """
        if view.live:
            return False
        head_start = self.takeover_timeout_s if view.leader_id else min(0.1, self.renew_interval_s)
        return view.silent_for >= head_start + rank * self.renew_interval_s
