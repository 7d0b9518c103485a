"""One term of leadership: every job's session, from recovery on grant to stop on revoke.

Created when the election grants leadership; :meth:`Term.recover` (run on the replica's
worker thread, not the election's) reads the job registry and opens each job: its counter
is started, its store recovered, and a CheckpointCoordinator made over them. On revoke,
:meth:`Term.close` stops every coordinator at once: pending checkpoints are aborted and a
checkpoint being finalised never reaches the store (the finaliser re-checks, and the
store's write is fenced anyway).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from sparkpoint.checkpoint import JobStatus
from sparkpoint.coordinator import CheckpointCoordinator, CleanupWorker, CoordinatorStoppedError
from sparkpoint.ha import Leadership
from sparkpoint.runs.job_runs import JobRuns
from sparkpoint.runs.session import JobSession, term_base
from sparkpoint.service.backend import Backend, ListedIds
from sparkpoint.service.driver_probe import DriverProber
from sparkpoint.service.lifecycle import end_job
from sparkpoint.service.orphans import OrphanCollector
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import JobRecord

log = logging.getLogger(__name__)

#: Statuses a job record keeps in the registry so followers and the next leader see them.
_PERSISTED = {
    JobStatus.RUNNING,
    JobStatus.FAILING,
    JobStatus.FINISHED,
    JobStatus.CANCELED,
    JobStatus.FAILED,
}


class Term:
    def __init__(
        self,
        leadership: Leadership,
        *,
        backend: Backend,
        storage: CheckpointStorage,
        option_defaults: Mapping[str, int],
        heartbeat_timeout_s: float,
        cleanup: CleanupWorker,
        driver_takeover_timeout_s: float = 3.0,
        driver_probe_after_s: float = 0.3,
        orphan_grace_s: float = 600.0,
        orphan_interval_s: float = 60.0,
        own_address: str = "",
    ) -> None:
        self.leadership = leadership
        self.epoch = leadership.epoch
        self._backend = backend
        self.storage = storage
        self._defaults = dict(option_defaults)
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._prober = DriverProber(driver_probe_after_s, own_address=own_address)
        # Deletions this term queues run only while it leads (docs/architecture.md §12).
        self._cleanup = cleanup.bound(leadership.can_act)
        self.registry = backend.registry(leadership)
        self.ready = threading.Event()
        self.closed = False
        self.close_reason = ""
        self._runs = JobRuns(
            self,
            option_defaults=option_defaults,
            takeover_timeout_s=driver_takeover_timeout_s,
            orphan_grace_s=orphan_grace_s,
        )
        self._lock = threading.RLock()
        # Rounds of tick() completed: a request can wait for the worker's next round.
        self._rounds = 0
        self._round_done = threading.Condition()
        self.orphans = OrphanCollector(
            self, grace_period_s=orphan_grace_s, interval_s=orphan_interval_s
        )

    # --- lifecycle --------------------------------------------------------------------

    def recover(self) -> None:
        """Open every registered job that is not over. Coordination errors propagate
        (the replica steps down); a job that cannot be opened otherwise is logged."""
        for record in self.registry.list():
            if record.status.is_globally_terminal:
                # Its previous leader died while removing it: finish the removal.
                self._end(record.job_id, record.status)
                continue
            try:
                session = self._open(record, term_base(self.epoch), resumed=True)
            except (ValueError, TypeError) as exc:  # a record the options refuse
                log.error("job %s not resumed: %s", record.job_id, exc)
                continue
            with self._lock:
                if self.closed:
                    session.coordinator.stop(self.close_reason)
                    return
                self._runs.adopt(session)
            log.info("resumed job %s (term %d)", record.job_id, self.epoch)
        self.ready.set()
        self.orphans.start()  # only now: the stores of every job have been read

    def close(self, reason: str) -> None:
        """Stop every coordinator now (pending checkpoints aborted, none completed)."""
        with self._lock:
            self.closed = True
            self.close_reason = reason
        sessions = self._runs.sessions()
        self.orphans.stop()
        self._prober.close()
        for session in sessions:
            session.coordinator.stop(f"leadership lost: {reason}")

    def tick(self) -> None:
        """One round over every job; coordination errors propagate."""
        try:
            self._tick()
        finally:
            with self._round_done:
                self._rounds += 1
                self._round_done.notify_all()

    def await_rounds(self, count: int, timeout_s: float) -> bool:
        """Wait until the worker has completed ``count`` more rounds (False at the
        timeout). Two rounds make sure one began after the caller's change."""
        with self._round_done:
            target = self._rounds + count
            return self._round_done.wait_for(lambda: self._rounds >= target, timeout_s)

    def _tick(self) -> None:
        for session in self.sessions():
            if not self.leadership.can_act() or self.closed:
                return
            try:
                session.coordinator.tick(allow_trigger=session.connected())
            except CoordinatorStoppedError:
                continue  # replaced by a re-registration meanwhile
            self._persist_status(session)
            self._prober.consider(session)
            self._runs.grant_if_due(session)

    # --- jobs -------------------------------------------------------------------------

    def may_act(self) -> bool:
        return self.leadership.can_act()

    def listed_now(self, job_id: str) -> ListedIds:
        """Every checkpoint id the job's store lists in ZooKeeper now (a fresh read)."""
        return self._backend.listed_ids(job_id)

    def sessions(self) -> list[JobSession]:
        return self._runs.sessions()

    def session(self, job_id: str) -> JobSession:
        return self._runs.session(job_id)

    @property
    def runs(self) -> JobRuns:
        """The driver runs of this term's jobs (registration, grants, heartbeats, acks)."""
        return self._runs

    # --- RunHost: what the driver runs need of a term -----------------------------------

    def ensure_can_act(self) -> None:
        self.leadership.ensure_can_act()

    def closed_reason(self) -> str | None:
        return self.close_reason if self.closed else None

    def stored_record(self, job_id: str) -> JobRecord | None:
        return self.registry.get(job_id)

    def persist(self, record: JobRecord) -> None:
        self.registry.put(record)

    def notice_base(self) -> int:
        return term_base(self.epoch)

    def open_session(self, record: JobRecord, notice_base: int) -> JobSession:
        return self._open(record, notice_base)

    def _open(self, record: JobRecord, notice_base: int, *, resumed: bool = False) -> JobSession:
        options = self._runs.stored_options(record.checkpoint_config)  # checked if new
        counter = self._backend.counter(record.job_id, self.leadership)
        counter.start()
        store = self._backend.store(record.job_id, self.leadership, options.max_retained)
        store.recover()
        coordinator = CheckpointCoordinator(
            record.graph,
            options,
            counter=counter,
            store=store,
            storage=self.storage,
            cleanup=self._cleanup,
            run_id=record.run_id or None,
        )
        coordinator.start(due_now=resumed)
        return JobSession(
            record,
            coordinator,
            counter,
            store,
            notice_base=notice_base,
            heartbeat_timeout_s=self._heartbeat_timeout_s,
        )

    def _persist_status(self, session: JobSession) -> None:
        status = session.job_status()
        if status not in _PERSISTED or status is session.persisted_status:
            return
        reason = session.coordinator.failure_reason or ""
        # Never written back over a record a registration replaced meanwhile.
        record = session.record.with_status(status, reason)
        if not self._runs.update_record(session, record):
            return
        session.persisted_status = status
        if status.is_globally_terminal:
            # The session stays in memory so the driver still hears how its job ended.
            self._end(record.job_id, status, session)

    def _end(self, job_id: str, status: JobStatus, session: JobSession | None = None) -> None:
        if session is not None:
            counter, store = session.counter, session.store
        else:
            counter = self._backend.counter(job_id, self.leadership)
            store = self._backend.store(job_id, self.leadership, self._defaults["max_retained"])
        end_job(
            job_id,
            status,
            store=store,
            counter=counter,
            registry=self.registry,
            storage=self.storage,
            cleanup=self._cleanup,
        )
