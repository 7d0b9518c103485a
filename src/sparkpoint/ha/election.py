"""Leader election among coordinator processes, with fencing (docs/architecture.md,
section 3).

Contenders queue as ephemeral sequential nodes under ``leader/latch``; the first in line
bumps ``leader/epoch`` by compare-and-set and leads with that epoch E. Every write it makes
from then on is fenced by E (see ``fencing``). The leader renews ``leader/info`` with a
fenced write every ``renew_interval_s``: that renewal is how a leader that was paused or
cut off learns it has been deposed, and it is the lease a follower can later watch.

One thread per contender runs the state machine of docs/ha.md. Kazoo's connection
listener and znode watches only record what happened and wake that thread.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

from sparkpoint import metrics
from sparkpoint.config import lease_timing_problem
from sparkpoint.ha.clock import lease_clock, wall_clock_ms
from sparkpoint.ha.connection import ConnectionState, ZooKeeperConnection
from sparkpoint.ha.errors import (
    ConflictError,
    FencedError,
    HAError,
    NotConnectedError,
    PossiblyAppliedError,
)
from sparkpoint.ha.fencing import (
    Fence,
    Op,
    ZooKeeperLeadership,
    bump_epoch,
    bump_landed,
    current_term,
    read_epoch,
)
from sparkpoint.ha.latch import LatchQueue
from sparkpoint.ha.leader_info import LeaderInfo, publish_leader_info
from sparkpoint.ha.leadership import (
    ContenderState,
    Leadership,
    LeadershipListener,
    NoListener,
)
from sparkpoint.ha.lease import (
    LeaseView,
    LeaseWatch,
    leader_process_gone,
    place_in_line,
    take_over,
)

log = logging.getLogger(__name__)


class ZooKeeperLeaderElection:
    """One contender. ``start()`` joins the election; ``stop()`` leaves it gracefully.

    ``renew_interval_s`` and ``takeover_timeout_s``: lease renewal and takeover (None:
    from the connection's settings, where a takeover timeout of 0 means no lease, so
    failover waits for the leader's session to expire).

    ``probe_leader``: with a lease, the first follower in line connects to the leader's
    advertised address each time it looks; a refused connection means the leader's process
    is gone, and it takes over without waiting out the lease (``lease.leader_process_gone``).

    ``suspend_grace_s``: how long a leader whose connection is SUSPENDED waits for it to
    come back before giving up leadership; it stops acting at once either way. The
    default, a third of the session timeout, ends before the server can expire the
    session (kazoo reports SUSPENDED after about two thirds of it without an answer).
    """

    def __init__(
        self,
        conn: ZooKeeperConnection,
        *,
        instance_id: str,
        address: str = "",
        listener: LeadershipListener | None = None,
        renew_interval_s: float | None = None,
        suspend_grace_s: float | None = None,
        takeover_timeout_s: float | None = None,
        lease_margin_s: float | None = None,
        probe_leader: bool = True,
    ) -> None:
        # Unless told otherwise, the lease follows the configuration (takeover 0 = no lease).
        settings = conn.settings
        renew_interval_s = renew_interval_s or settings.lease_renew_interval_s
        if takeover_timeout_s is None:
            takeover_timeout_s = settings.takeover_timeout_s or None
        self.conn = conn
        self.instance_id = instance_id
        self.address = address
        self.probe_leader = probe_leader
        self._listener = listener or NoListener()
        self.renew_interval_s = renew_interval_s
        self.suspend_grace_s = (
            conn.settings.session_timeout_s / 3 if suspend_grace_s is None else suspend_grace_s
        )
        if takeover_timeout_s is not None:
            problem = lease_timing_problem(takeover_timeout_s, renew_interval_s)
            if problem:
                raise ValueError(f"takeover timeout {takeover_timeout_s:g} s {problem}")
        self.takeover_timeout_s = takeover_timeout_s
        self.lease_margin_s = (
            (takeover_timeout_s or 0.0) / 4 if lease_margin_s is None else lease_margin_s
        )
        self._lease = (
            LeaseWatch(takeover_timeout_s, renew_interval_s) if takeover_timeout_s else None
        )
        # The token finds our latch node again after an in-doubt create.
        self._latch = LatchQueue(conn, uuid.uuid4().hex, instance_id, address)
        self._wake = threading.Condition()
        self._poked = False
        self._events: list[ConnectionState] = []
        self._stopping = False
        self._step_down_request: str | None = None
        self._thread: threading.Thread | None = None

        self._state = ContenderState.STOPPED
        self._leadership: ZooKeeperLeadership | None = None
        self._suspended_since: float | None = None
        self._next_renewal = 0.0
        self._renewals = 0
        self._since_ms = 0

        self.terms_won = 0
        self.demotions: list[str] = []
        conn.add_listener(self._on_connection)

    # --- public -------------------------------------------------------------------------

    @property
    def state(self) -> ContenderState:
        return self._state

    @property
    def leadership(self) -> ZooKeeperLeadership | None:
        return self._leadership

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("election already started")
        self._state = ContenderState.FOLLOWER
        self._thread = threading.Thread(
            target=self._run, name=f"election-{self.instance_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Leave the election: release leadership (delete leader/info and our latch node) so
        the next contender takes over within one election round."""
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        self._state = ContenderState.STOPPED

    def step_down(self, reason: str) -> None:
        """Give up leadership (if held) and queue again at the back of the line."""
        with self._wake:
            self._step_down_request = reason
            self._wake.notify_all()

    def status(self) -> dict[str, Any]:
        lead = self._leadership
        return {
            "instance_id": self.instance_id,
            "state": self._state.value,
            "term": lead.epoch if lead else None,
            "epoch": lead.epoch if lead else None,  # deprecated alias of "term"
            "terms_won": self.terms_won,
            "demotions": list(self.demotions),
            "latch_node": self._latch.node,
            "can_act": lead.can_act() if lead else False,
            "lease_remaining_s": lead.lease_remaining() if lead else None,
        }

    # --- event plumbing (never blocks, never calls ZooKeeper) ---------------------------

    def _on_connection(self, state: ConnectionState) -> None:
        lead = self._leadership
        if lead is not None and state is not ConnectionState.CONNECTED:
            lead._suspend()  # stop acting *now*, before the election thread even wakes
        with self._wake:
            self._events.append(state)
            self._wake.notify_all()

    def _poke(self, *_: object) -> None:
        with self._wake:
            self._poked = True
            self._wake.notify_all()

    def _on_fenced(self, error: FencedError) -> None:
        lead = self._leadership
        if lead is not None:
            lead._suspend()
        self.step_down(f"fenced: {error}")

    def _wait(self, timeout: float) -> list[ConnectionState]:
        with self._wake:
            if not (self._poked or self._events or self._stopping or self._step_down_request):
                self._wake.wait(max(timeout, 0.0))
            self._poked = False
            events, self._events = self._events, []
        return events

    # --- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        events: list[ConnectionState] = []
        while not self._stopping:
            try:
                if self._leadership is None:
                    self._follow(events)
                    events = self._wait(self._follower_wait())
                else:
                    self._lead(events)
                    events = self._wait(self._next_renewal - lease_clock())
            except HAError as exc:
                log.warning("%s: %s", self.instance_id, exc)
                events = self._wait(0.2)
            except Exception:  # a bug must not silently end the election thread
                log.exception("%s: election loop error", self.instance_id)
                events = self._wait(0.5)
        self._leave()

    def _follower_wait(self) -> float:
        if self.conn.state is not ConnectionState.CONNECTED:
            return 0.5
        # Watching a lease means looking at it often enough to notice it lapse promptly.
        return self.renew_interval_s / 2 if self.takeover_timeout_s else 1.0

    def _follow(self, _events: list[ConnectionState]) -> None:
        if self._step_down_request is not None:
            self._step_down_request = None  # nothing to give up
        if self.conn.state is not ConnectionState.CONNECTED:
            return
        # The lease is looked at before the queue, so a leader that left the queue and
        # then released leader/info is seen gone from both.
        view = self._lease.look(self.conn, self._poke) if self._lease is not None else None
        children = self._latch.queue()
        if children is None:
            self._poke()  # the queue changed under us: look again at once
            return
        node = self._latch.node
        assert node is not None
        if self._lease is not None and view is not None:
            owners = [self._latch.owner(c) for c in children]
            rank, holder_queued = place_in_line(node, children, owners, view)
            # Followers in line look whether a live lease's holder still has a process.
            gone = (
                self.probe_leader
                and rank >= 0
                and view.live
                and leader_process_gone(view, min(0.2, self.renew_interval_s), self.address)
            )
            if rank >= 0 and self._lease.may_take_over(
                view, rank, holder_queued=holder_queued, leader_gone=gone
            ):
                log.info("%s: %s; taking over", self.instance_id, view.takeover_reason(gone))
                self._try_lead(view=view)
            return
        if children[0] == node:
            self._try_lead()
        else:
            self._latch.watch_predecessor(children, self._poke)

    def _try_lead(self, view: LeaseView | None = None) -> None:
        """Bump the epoch: from the head of the queue (no lease) by compare-and-set, or as
        a lease takeover that also checks leader/info is still what ``view`` judged."""
        if view is not None and view.epoch is None:
            read_epoch(self.conn)  # a fresh cluster: create leader/epoch, then look again
            self._poke()
            return
        seen = read_epoch(self.conn) if view is None else view.epoch
        nonce = uuid.uuid4().hex
        payload = json.dumps(
            {"instance_id": self.instance_id, "nonce": nonce, "at_ms": wall_clock_ms()}
        ).encode()
        # The lease counts from before the bump: a follower can only see the new epoch
        # after it, so it always waits longer than this leader may act unrenewed.
        sent = lease_clock()
        try:
            if view is None:
                epoch = bump_epoch(self.conn, seen, payload)
            else:
                epoch = take_over(self.conn, view, payload, self._info_bytes(seen + 1))
        except ConflictError as exc:
            log.info("%s: not taking term %d: %s", self.instance_id, seen + 1, exc)
            return
        except PossiblyAppliedError:
            landed = bump_landed(self.conn, seen, nonce)
            if landed is None:
                return
            epoch = landed
        fence = Fence(self.conn, epoch, on_fenced=self._on_fenced)
        leadership = ZooKeeperLeadership(epoch, self.instance_id, fence)
        self._leadership = leadership
        self._since_ms = wall_clock_ms()
        self._renewals = 0
        self._suspended_since = None
        try:
            self._publish(first=True)
        except (FencedError, HAError) as exc:
            self._step_down(f"could not publish leader info: {exc}", fenced=True)
            return
        self._extend_lease(leadership, sent)
        self._next_renewal = lease_clock() + self.renew_interval_s
        self._state = ContenderState.LEADER
        self.terms_won += 1
        metrics.IS_LEADER.set(1)
        metrics.LEADER_TERM.set(epoch)
        metrics.LEADER_EPOCH.set(epoch)  # the deprecated name, for one release
        metrics.LEADER_CHANGES.inc()
        log.info("%s: leader with term %d", self.instance_id, epoch)
        self._listener.leadership_granted(leadership)

    def _info_bytes(self, epoch: int) -> bytes:
        return LeaderInfo(
            instance_id=self.instance_id,
            address=self.address,
            epoch=epoch,
            since_ms=self._since_ms,
            renewals=self._renewals,
            renewed_ms=wall_clock_ms(),
        ).to_bytes()

    def _publish(self, *, first: bool) -> None:
        lead = self._leadership
        assert lead is not None
        publish_leader_info(self.conn, lead.fence, self._info_bytes(lead.epoch), first=first)

    def _lead(self, events: list[ConnectionState]) -> None:
        lead = self._leadership
        assert lead is not None
        now = lease_clock()
        # Renew first: after a long pause (SIGSTOP, GC, a frozen VM) this fenced write is
        # how the old leader learns, deterministically, that it has been deposed.
        connected = self.conn.state is ConnectionState.CONNECTED
        if now >= self._next_renewal and (connected or not lead.is_suspended):
            self._next_renewal = now + self.renew_interval_s
            self._renewals += 1
            try:
                self._publish(first=False)
                self._extend_lease(lead, now)
            except FencedError as exc:
                self._step_down(f"fenced: {exc}", fenced=True)
                return
            except (PossiblyAppliedError, NotConnectedError):
                lead._suspend()
                self._suspended_since = self._suspended_since or now
        for event in events:
            if event is ConnectionState.LOST:
                self._step_down_after_session_loss(lead)
                return
            if event is ConnectionState.SUSPENDED:
                lead._suspend()
                self._suspended_since = self._suspended_since or now
                self._state = ContenderState.SUSPENDED
                log.warning("%s: connection suspended; not acting", self.instance_id)
        if lead.is_suspended and self.conn.state is ConnectionState.CONNECTED:
            self._resume_if_still_leader(lead)
            if self._leadership is None:
                return
        if self._step_down_request is not None:
            reason, self._step_down_request = self._step_down_request, None
            self._step_down(reason, fenced=reason.startswith("fenced"))
            return
        if (
            self._suspended_since is not None
            and lead.is_suspended
            and lease_clock() - self._suspended_since > self.suspend_grace_s
        ):
            self._step_down(f"connection suspended for more than {self.suspend_grace_s:.1f} s")

    def _step_down_after_session_loss(self, lead: ZooKeeperLeadership) -> None:
        """LOST ends the term. Before saying why, confirm against the epoch (never assume):
        a fenced, check-only transaction tells "deposed by a successor" (counted as a fenced
        write) from "alone, session merely expired". Nothing is written either way."""
        reason = "ZooKeeper session lost"
        if self.conn.wait_for(ConnectionState.CONNECTED, min(self.suspend_grace_s, 2.0)):
            try:
                lead.fence.commit([], "confirming leadership after session loss")
            except FencedError as exc:
                self._step_down(f"fenced: {exc}", fenced=True)
                return
            except HAError as exc:
                reason += f" (term not confirmed: {exc})"
        self._step_down(reason)

    def _extend_lease(self, lead: Leadership, sent: float) -> None:
        """A renewal sent at ``sent`` and applied keeps this leader acting until
        ``sent + takeover timeout - margin``. Followers count the takeover timeout from
        when they *saw* the renewal, which is later than ``sent``, so the leader always
        stops acting before any follower may take over."""
        if self.takeover_timeout_s is not None:
            lead._set_lease_deadline(sent + self.takeover_timeout_s - self.lease_margin_s)

    def _resume_if_still_leader(self, lead: ZooKeeperLeadership) -> None:
        # Same session is back. Re-read the epoch before acting again (never assume).
        term = current_term(self.conn)
        if term != lead.epoch:
            moved_to = "?" if term is None else term
            self._step_down(f"fenced: the term moved to {moved_to} while suspended", fenced=True)
            return
        lead._resume()
        self._suspended_since = None
        self._state = ContenderState.LEADER
        log.info("%s: connection back; leading term %d again", self.instance_id, lead.epoch)

    def _step_down(self, reason: str, *, fenced: bool = False) -> None:
        lead = self._leadership
        if lead is None:
            return
        self._leadership = None
        lead._revoke(reason)
        self._state = ContenderState.FENCED if fenced else ContenderState.FOLLOWER
        self.demotions.append(reason)
        metrics.IS_LEADER.set(0)
        metrics.LEADER_CHANGES.inc()
        log.warning("%s: gave up leadership of term %d: %s", self.instance_id, lead.epoch, reason)
        try:
            self._listener.leadership_revoked(lead, reason)
        finally:
            self._latch.leave(self.instance_id)
            self._state = ContenderState.FOLLOWER

    def _leave(self) -> None:
        lead = self._leadership
        if lead is not None and self.conn.state is ConnectionState.CONNECTED:
            # Stop acting and leave the queue before releasing the lease: a follower that
            # sees leader/info gone then also sees the holder gone, and goes at once.
            lead._suspend()
            self._latch.leave(self.instance_id)
            try:
                lead.fence.commit([Op.delete(self.conn.paths.leader_info)], "releasing leader info")
            except HAError as exc:
                log.info("%s: leader info not released: %s", self.instance_id, exc)
        self._step_down("stopping")
        self._latch.leave(self.instance_id)
