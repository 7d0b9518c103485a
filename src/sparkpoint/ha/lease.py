"""Watching the leader's lease from a follower, and taking over (docs/ha.md, leases).

The leader renews leader/info every renewal interval. A follower that sees no renewal
for the takeover timeout, on its own lease clock (ha/clock.py), may take over — by one transaction
that checks leader/info is still the version it judged and compares-and-sets leader/epoch
from the version it saw. So at most one follower wins, and a renewal that lands between
the look and the takeover makes the takeover fail: the renewed leader keeps its epoch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from sparkpoint.ha import translate
from sparkpoint.ha.clock import lease_clock
from sparkpoint.ha.connection import ZooKeeperConnection
from sparkpoint.ha.errors import ConflictError, HAError
from sparkpoint.ha.leader_info import LeaderInfo
from sparkpoint.liveness import Liveness, probe


@dataclass(frozen=True, slots=True)
class LeaseView:
    """What a follower makes of the lease right now."""

    epoch: int | None  # the epoch version seen: the takeover CAS compares against it
    leader_id: str | None  # the leader whose lease is current or lapsed; None: no leader
    silent_for: float  # seconds since the lease last changed, on this follower's clock
    live: bool  # a leader holds the current epoch and renewed within the takeover timeout
    info_version: int | None = None  # data version of leader/info judged; None: absent
    holder: str | None = None  # who won the current epoch (from leader/epoch's payload)
    leader_address: str = ""  # where the current leader serves (from leader/info)
    leader_renewals: int = 0  # how often the current leader renewed (from leader/info)

    def takeover_reason(self, leader_gone: bool) -> str:
        """Why a follower takes over from what it saw (``leader_gone``: its probe found
        the leader's process gone)."""
        if leader_gone:
            return f"process of {self.leader_id} at {self.leader_address} is gone"
        if self.leader_id:
            return f"lease of {self.leader_id} lapsed {self.silent_for:.2f} s ago"
        return "no leader"


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
                raw, info_stat = conn.retry(conn.client.get, paths.leader_info)
            except NoNodeError:
                raw, info_stat = None, None
            try:
                epoch_raw, epoch_stat = conn.retry(conn.client.get, paths.epoch)
            except NoNodeError:
                epoch_raw, epoch_stat = b"", None
            conn.client.exists(paths.leader_info, watch=wake)
        epoch = epoch_stat.version if epoch_stat is not None else None
        info = LeaderInfo.from_bytes(raw) if raw else None
        view = self.observe(info, epoch, lease_clock())
        current = view.leader_id is not None and info is not None
        return LeaseView(
            epoch=view.epoch,
            leader_id=view.leader_id,
            silent_for=view.silent_for,
            live=view.live,
            info_version=info_stat.version if info_stat is not None else None,
            holder=_holder(epoch_raw),
            leader_address=info.address if current and info else "",
            leader_renewals=info.renewals if current and info else 0,
        )

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

    def may_take_over(
        self, view: LeaseView, rank: int, *, holder_queued: bool = False, leader_gone: bool = False
    ) -> bool:
        """Whether the follower ``rank``-th in line (the silent leader left out) goes now.

        The first goes first; each one behind gives those ahead a renewal interval's head
        start, so they rarely collide (and the takeover transaction makes a collision
        harmless). Without a current leader/info the epoch's holder may still be alive
        and about to publish (``holder_queued``: it still has a latch node): its lease
        counts from before its epoch bump, so it too gets the whole takeover timeout. Only
        when the holder is gone (or there never was one) does "no leader" go at once —
        after a moment, since a winner publishes its info one round trip after its bump.

        ``leader_gone``: this follower found the leader's process gone, so it need not
        wait out the lease: the first in line goes at once, each one behind after another
        renewal interval of the leader's silence (the first may be a node whose own
        process is gone too). A wrong guess is harmless to ZooKeeper state (the takeover is
        fenced and checks the lease it judged: a leader that renews meanwhile keeps its
        epoch); docs/ha.md says what may overlap.
        """
        if leader_gone and view.leader_id is not None:
            # Its process is gone (see leader_process_gone): no need to wait for the lease.
            return rank == 0 or view.silent_for >= rank * self.renew_interval_s
        if view.live:
            return False
        full = view.leader_id is not None or holder_queued
        head_start = self.takeover_timeout_s if full else min(0.1, self.renew_interval_s)
        return view.silent_for >= head_start + rank * self.renew_interval_s


def place_in_line(
    node: str, children: list[str], owners: list[str | None], view: LeaseView
) -> tuple[int, bool]:
    """``node``'s rank among the latch ``children`` (owned by ``owners``) that may take over
    from the lease holder (-1: none), and whether the holder still has a latch node.

    One place in line per instance, its newest node: a replica restarted after a kill has
    queued again while its old node waits for its dead session to expire, and that node
    must not take the first place from a live follower."""
    newest = {o: c for c, o in zip(children, owners, strict=True)}
    candidates = [
        c for c, o in zip(children, owners, strict=True)
        if o != view.leader_id and newest.get(o) == c
    ]  # fmt: skip
    holder_queued = view.holder is not None and view.holder in owners
    return (candidates.index(node) if node in candidates else -1), holder_queued


def take_over(
    conn: ZooKeeperConnection, view: LeaseView, payload: bytes, info_if_absent: bytes
) -> int:
    """Bump leader/epoch from ``view.epoch`` in one transaction with a check that
    leader/info is still what the follower judged; return the new epoch.

    leader/info present: ``check(leader/info, version judged)``. Absent:
    ``create(leader/info, info_if_absent)`` (ephemeral, ours) — a check cannot test absence,
    but a create fails if a leader re-published in between. Raises ConflictError when either
    part fails (look again), PossiblyAppliedError when the outcome is unknown.
    """
    if view.epoch is None:
        raise HAError("no leader/epoch to take over")
    paths = conn.paths
    conn.require_connected()
    tx = conn.client.transaction()
    if view.info_version is not None:
        tx.check(paths.leader_info, view.info_version)
    else:
        tx.create(paths.leader_info, info_if_absent, ephemeral=True)
    tx.set_data(paths.epoch, payload, version=view.epoch)
    with translate.writes("taking over the leader term"):
        results = tx.commit_async().get(timeout=conn.settings.session_timeout_s)
    failures = [r for r in results if isinstance(r, Exception)]
    if not failures:
        return int(results[1].version)
    if any(isinstance(r, BadVersionError | NoNodeError | NodeExistsError) for r in failures):
        raise ConflictError(
            f"takeover from term {view.epoch} refused: the lease or the term moved "
            f"({', '.join(type(r).__name__ for r in failures)})"
        )
    raise HAError(f"takeover from term {view.epoch} failed: {failures}")


def _holder(raw: bytes) -> str | None:
    try:
        holder = json.loads(raw.decode()).get("instance_id")
    except (ValueError, AttributeError):
        return None
    return holder if isinstance(holder, str) else None


def leader_process_gone(view: LeaseView, timeout_s: float, own_address: str = "") -> bool:
    """Whether the current leader's process is gone while its host is up: a TCP connect
    to its advertised address is *refused* (:mod:`sparkpoint.liveness` says when a refusal
    counts: never from another host's or namespace's loopback). Only IP literals and
    ``localhost`` are probed, so no name lookup can stall the election thread; only a
    leader that renewed at least once, so one that has not started serving yet is not
    taken for dead.
    """
    if view.leader_id is None or view.leader_renewals < 1:
        return False
    verdict = probe(view.leader_address, timeout_s, own_address=own_address)
    return verdict is Liveness.GONE
