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
import uuid
from collections.abc import Mapping
from typing import Any

from sparkpoint.checkpoint import CheckpointPointer, JobGraph, JobStatus
from sparkpoint.coordinator import CheckpointCoordinator, CleanupWorker, CoordinatorStoppedError
from sparkpoint.ha import Leadership
from sparkpoint.service.backend import Backend
from sparkpoint.service.driver_probe import DriverProber
from sparkpoint.service.errors import JobGraphConflictError, NotLeaderError, UnknownJobError
from sparkpoint.service.lifecycle import end_job
from sparkpoint.service.notices import term_base
from sparkpoint.service.options import job_options
from sparkpoint.service.orphans import OrphanCollector
from sparkpoint.service.session import JobSession
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
    ) -> None:
        self.leadership = leadership
        self.epoch = leadership.epoch
        self._backend = backend
        self.storage = storage
        self._defaults = dict(option_defaults)
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._driver_takeover_timeout_s = driver_takeover_timeout_s
        self._prober = DriverProber(driver_probe_after_s)
        self._cleanup = cleanup
        self.registry = backend.registry(leadership)
        self.ready = threading.Event()
        self.closed = False
        self.close_reason = ""
        self._sessions: dict[str, JobSession] = {}
        self._lock = threading.RLock()
        # Rounds of tick() completed: a request can wait for the worker's next round.
        self._rounds = 0
        self._round_done = threading.Condition()
        self._register_lock = threading.Lock()
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
                self._sessions[record.job_id] = session
            log.info("resumed job %s (term %d)", record.job_id, self.epoch)
        self.ready.set()
        self.orphans.start()  # only now: the stores of every job have been read

    def close(self, reason: str) -> None:
        """Stop every coordinator now (pending checkpoints aborted, none completed)."""
        with self._lock:
            self.closed = True
            self.close_reason = reason
            sessions = list(self._sessions.values())
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
            if session.takeover_due(self._driver_takeover_timeout_s):
                self._grant_standby(session)

    # --- jobs -------------------------------------------------------------------------

    def retained_now(self, job_id: str) -> list[CheckpointPointer]:
        """The job's retained checkpoints as ZooKeeper holds them now (a fresh read)."""
        return self._backend.retained(job_id)

    def sessions(self) -> list[JobSession]:
        with self._lock:
            return list(self._sessions.values())

    def session(self, job_id: str) -> JobSession:
        with self._lock:
            session = self._sessions.get(job_id)
        if session is None:
            raise UnknownJobError(f"job {job_id!r} is not registered")
        return session

    def register(
        self,
        graph: JobGraph,
        config: Mapping[str, Any],
        *,
        replace: bool,
        standby: bool = False,
        address: str = "",
    ) -> tuple[JobSession, str]:
        """Register ``graph`` (idempotent for the same graph and options: the job keeps its
        coordinator). Every registration is a new driver run with a new id, persisted with
        the job's record so that the next leader too refuses every earlier run. Returns the
        session and the run id.

        ``standby``: register as the job's warm standby run instead, when the job is running
        with the same graph and options (else this run becomes the active one); it replaces
        any earlier standby. ``address``: where the run's driver process answers liveness
        probes (see :mod:`sparkpoint.service.driver_probe`)."""
        options = job_options(self._defaults, config)  # refuse bad options before any write
        run_id = uuid.uuid4().hex
        if standby:
            session = self._register_standby(graph, options, run_id, address)
            if session is not None:
                return session, run_id
        with self._register_lock:
            with self._lock:
                existing = self._sessions.get(graph.job_id)
            old = existing.record if existing else self.registry.get(graph.job_id)
            if old is not None:
                old_uids = {op.uid for op in old.graph.operators}
                new_uids = {op.uid for op in graph.operators}
                if old_uids != new_uids and not replace:
                    raise JobGraphConflictError(
                        f"job {graph.job_id} is registered with operators "
                        f"{sorted(old_uids)}, not {sorted(new_uids)}; send replace=true to "
                        "replace its graph"
                    )
            if (
                existing is not None
                and existing.record.graph == graph
                and existing.coordinator.options == options
                and existing.job_status() in (JobStatus.RUNNING, JobStatus.CREATED)
            ):
                self.leadership.ensure_can_act()
                # Refuse the earlier run from now on, then make it last beyond this term.
                existing.coordinator.begin_run(run_id)
                existing.released = False
                record = existing.record.with_run(run_id, address)
                self.registry.put(record)
                existing.record = record
                log.info("job %s: driver run %s registered", graph.job_id, run_id)
                return existing, run_id
            record = JobRecord(
                graph,
                dict(config),
                JobStatus.RUNNING,
                run_id=run_id,
                run_address=address,
                **({"registered_ms": old.registered_ms} if old is not None else {}),
            )
            self.leadership.ensure_can_act()
            if existing is not None:
                existing.coordinator.begin_run(run_id)
            self.registry.put(record)
            base = existing.last_seq() if existing else term_base(self.epoch)
            if existing is not None:
                existing.coordinator.stop(f"job {graph.job_id} registered again")
            session = self._open(record, base)
            with self._lock:
                if self.closed:
                    session.coordinator.stop(self.close_reason)
                    raise NotLeaderError(f"leadership lost: {self.close_reason}")
                self._sessions[graph.job_id] = session
            log.info(
                "registered job %s (%d operators), driver run %s",
                graph.job_id,
                len(graph.operators),
                run_id,
            )
            return session, run_id

    # --- standby driver runs ----------------------------------------------------------

    def _register_standby(
        self, graph: JobGraph, options: Any, run_id: str, address: str
    ) -> JobSession | None:
        """Make ``run_id`` the standby of a running job; None when the job has no active
        run to stand by for (the caller registers it as active instead)."""
        with self._register_lock:
            with self._lock:
                existing = self._sessions.get(graph.job_id)
            if existing is None or existing.job_status() not in (
                JobStatus.RUNNING,
                JobStatus.CREATED,
            ):
                return None
            if existing.record.graph != graph or existing.coordinator.options != options:
                raise JobGraphConflictError(
                    f"job {graph.job_id}: a standby driver must register the active run's "
                    "graph and checkpointing options"
                )
            self.leadership.ensure_can_act()
            record = existing.record.with_standby(run_id, address)
            self.registry.put(record)
            existing.record = record
        log.info("job %s: standby driver run %s registered", graph.job_id, run_id)
        return existing

    def release(self, job_id: str, run_id: str) -> None:
        """A driver run ends cleanly: the active run's standby (if any) takes over at once;
        a standby that leaves is forgotten. Any other run is refused."""
        session = self.session(job_id)
        with self._register_lock:
            if session.standby_run_id and run_id == session.standby_run_id:
                self.leadership.ensure_can_act()
                record = session.record.with_standby("")
                self.registry.put(record)
                session.record = record
                return
            session.check_run(run_id)
            session.released = True
        log.info("job %s: driver run %s released the job", job_id, run_id)

    def _grant_standby(self, session: JobSession) -> None:
        """End the silent (or released) active run and make the standby the current run:
        the fence refuses the old run's calls from now on."""
        with self._register_lock:
            with self._lock:
                if self._sessions.get(session.job_id) is not session:
                    return
            if not session.takeover_due(self._driver_takeover_timeout_s):
                return
            old, standby = session.run_id, session.standby_run_id
            why = ("released it" if session.released
                   else "is gone (its process refused a probe)" if session.run_gone()
                   else "went silent")  # fmt: skip
            self.leadership.ensure_can_act()
            session.coordinator.begin_run(standby, due_now=True)
            record = session.record.with_standby_granted()
            self.registry.put(record)
            session.record = record
            session.granted()
        log.warning(
            "job %s: driver run %s %s; standby run %s granted the job",
            session.job_id,
            old,
            why,
            standby,
        )

    def _open(self, record: JobRecord, notice_base: int, *, resumed: bool = False) -> JobSession:
        options = job_options(self._defaults, record.checkpoint_config)
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
        with self._register_lock:  # never write back a record a registration replaced
            with self._lock:
                if self._sessions.get(session.job_id) is not session:
                    return
            record = session.record.with_status(status, reason)
            self.registry.put(record)
            session.record = record
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
