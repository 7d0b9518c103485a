"""A coordinator replica: contends for leadership and, while leading, runs the jobs.

The election calls :meth:`Replica.leadership_granted` / ``leadership_revoked`` from its own
thread; both only swap the current :class:`Term` (revoke also stops its coordinators, which
is in-memory work). Recovery and the tick loop run on the replica's worker thread, which
acts only while ``leadership.can_act()``. A coordination error (fenced, not connected, in
doubt) from any coordinator makes the replica step down: it may no longer be leader, and
the fenced writes guarantee it changed nothing if so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sparkpoint.config import Config
from sparkpoint.coordinator import CleanupWorker
from sparkpoint.ha import HAError, LeaderElection, Leadership
from sparkpoint.runs.errors import NotLeaderError
from sparkpoint.service.backend import Backend
from sparkpoint.service.term import Term
from sparkpoint.storage import CheckpointStorage

log = logging.getLogger(__name__)


class Replica:
    def __init__(
        self,
        config: Config,
        *,
        backend: Backend,
        storage: CheckpointStorage,
        address: str,
        instance_id: str,
    ) -> None:
        self.config = config
        self.backend = backend
        self.storage = storage
        self.address = address
        self.instance_id = instance_id
        self.election: LeaderElection | None = None
        self.cleanup = CleanupWorker(
            f"sparkpoint-cleanup-{instance_id}", delay_s=config.store.cleanup_delay_s
        )
        self._term: Term | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._option_defaults = config.job_option_defaults()

    # --- lifecycle --------------------------------------------------------------------

    def start(self, election_factory: Callable[[Replica], LeaderElection]) -> None:
        self._worker = threading.Thread(target=self._run, name="sparkpoint-ticker", daemon=True)
        self._worker.start()
        self.election = election_factory(self)
        self.election.start()

    def stop(self) -> None:
        """Leave the election (releasing leadership), then stop the worker."""
        if self.election is not None:
            self.election.stop()
        self._stopping.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join(10)
        with self._lock:
            term, self._term = self._term, None
        if term is not None:
            term.close("replica stopping")
        self.cleanup.close(10)

    # --- LeadershipListener -----------------------------------------------------------

    def leadership_granted(self, leadership: Leadership) -> None:
        term = Term(
            leadership,
            backend=self.backend,
            storage=self.storage,
            option_defaults=self._option_defaults,
            heartbeat_timeout_s=self.config.service.heartbeat_timeout_s,
            driver_takeover_timeout_s=self.config.service.driver_takeover_timeout_s,
            driver_probe_after_s=self.config.service.driver_probe_after_s,
            cleanup=self.cleanup,
            orphan_grace_s=self.config.store.orphan_grace_s,
            orphan_interval_s=self.config.store.orphan_scan_interval_s,
            own_address=self.address,
        )
        with self._lock:
            self._term = term
        log.info("%s: leading with term %d; recovering jobs", self.instance_id, term.epoch)
        self._wake.set()

    def leadership_revoked(self, leadership: Leadership, reason: str) -> None:
        with self._lock:
            term = self._term
            if term is None or term.leadership is not leadership:
                return
            self._term = None
        term.close(reason)
        log.warning("%s: leadership of term %d lost: %s", self.instance_id, term.epoch, reason)

    # --- what the API asks ------------------------------------------------------------

    def wake(self) -> None:
        """Run the worker's next round now (a job changed status)."""
        self._wake.set()

    @property
    def term(self) -> Term | None:
        return self._term

    def step_down(self, reason: str) -> None:
        log.warning("%s: stepping down: %s", self.instance_id, reason)
        term = self._term
        if term is not None:
            term.close(reason)  # stop acting now; the election thread releases the epoch
        if self.election is not None:
            self.election.step_down(reason)

    def active_term(self) -> Term:
        """The term to act in, or NotLeaderError saying where the leader is."""
        term = self._term
        if term is not None and not term.closed:
            if term.ready.is_set() and term.leadership.can_act():
                return term
            why = "recovering its jobs" if not term.ready.is_set() else "suspended"
            raise NotLeaderError(
                f"this replica leads term {term.epoch} but is {why}; retry shortly",
                code="leader_not_ready",
            )
        leader = self.known_leader()
        if leader is not None and leader.get("address") and leader["address"] != self.address:
            raise NotLeaderError(
                f"{leader['instance_id']} leads term {leader['term']}",
                leader_address=str(leader["address"]),
            )
        raise NotLeaderError("no coordinator is leader at the moment; retry shortly")

    def known_leader(self) -> dict[str, Any] | None:
        if not self.backend.connected():
            return None
        try:
            return self.backend.leader_info()
        except HAError:
            return None

    def state(self) -> str:
        election = self.election
        return election.state.value if election is not None else "stopped"

    def is_ready(self) -> bool:
        """Connected, and leading (recovered) or following a known leader."""
        if not self.backend.connected():
            return False
        term = self._term
        if term is not None:
            return term.ready.is_set() and term.leadership.can_act()
        return self.known_leader() is not None

    # --- the worker -------------------------------------------------------------------

    def _run(self) -> None:
        interval = self.config.service.tick_interval_s
        while not self._stopping.is_set():
            term = self._term
            if term is not None and not term.closed and term.leadership.can_act():
                try:
                    if not term.ready.is_set():
                        term.recover()
                    else:
                        term.tick()
                except HAError as exc:
                    self.step_down(f"{type(exc).__name__}: {exc}")
                except Exception:  # a bug must not end the worker and freeze every job
                    log.exception("%s: error in the coordinator loop", self.instance_id)
            self._wake.wait(interval)
            self._wake.clear()
