"""The driver runs of every job one coordinator leads (docs/architecture.md, "Driver runs").

A driver run is one process's turn at a job: registering starts one with a new id, and
from then on every earlier run of the job is refused (its heartbeats, acks, declines and
restore plans raise ``SupersededRunError``). A run may instead register as the job's warm
standby; it is granted the job when the active run releases it, goes silent for the
takeover timeout, or is found gone by a liveness probe. Registering a changed graph
replaces the job's coordinator; the new one reads the store only once the old one has
settled, so a restore plan never names a checkpoint that a late completion subsumes.

:class:`JobRuns` is that lifecycle, once. The REST API (``service.api.driver``) and the
embedded channel (``pipeline.embedded``) are thin adapters over it; where the jobs live
— a leadership term on ZooKeeper, or a driver's own process — is the :class:`RunHost`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sparkpoint.checkpoint import JobGraph, JobStatus
from sparkpoint.coordinator import Acknowledgement, AckResult, CheckpointingOptions
from sparkpoint.runs.errors import (
    JobGraphConflictError,
    JobNotRunningError,
    JobNotSettledError,
    NotLeaderError,
    UnknownJobError,
)
from sparkpoint.runs.messages import RescaleTo, RestoreMode, RunNotice
from sparkpoint.runs.options import job_options, stored_job_options
from sparkpoint.runs.rescales import instruction, new_request, only_parallelism_differs
from sparkpoint.runs.restore import PlannedRestore, plan_run_restore
from sparkpoint.runs.session import JobSession
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import JobRecord, RescaleRequest

log = logging.getLogger(__name__)


class RunHost(Protocol):
    """Where a :class:`JobRuns`' jobs live."""

    storage: CheckpointStorage

    def ensure_can_act(self) -> None:
        """Raise unless this host may still change its jobs (leadership, fenced)."""

    def closed_reason(self) -> str | None:
        """Why the host stopped taking jobs; None while it takes them."""

    def stored_record(self, job_id: str) -> JobRecord | None: ...

    def persist(self, record: JobRecord) -> None:
        """Write the job's record where the next leader reads it."""

    def open_session(self, record: JobRecord, notice_base: int) -> JobSession:
        """A started coordinator for ``record``'s job, over its counter and store."""
        ...

    def notice_base(self) -> int:
        """Where the notice numbers of a job opened afresh begin."""
        ...


@dataclass(frozen=True, slots=True)
class Registration:
    session: JobSession
    run_id: str
    role: str  # "active" or "standby"
    #: The notice number the run heartbeats after: its own triggers follow it.
    notification_seq: int


@dataclass(frozen=True, slots=True)
class Beat:
    role: str
    job_status: JobStatus
    notices: list[RunNotice]
    notification_seq: int
    #: An active run's: the parallelism to run at, and a pending request (runs.rescales).
    rescale: RescaleTo | None = None


class JobRuns:
    def __init__(
        self,
        host: RunHost,
        *,
        option_defaults: Mapping[str, int],
        takeover_timeout_s: float,
        orphan_grace_s: float | None = None,
    ) -> None:
        """``orphan_grace_s``: the grace period of the host's orphan collector, which no
        job's checkpoint timeout may exceed (None: the host has no collector)."""
        self._host = host
        self._defaults = dict(option_defaults)
        self._grace_s = orphan_grace_s
        self._takeover_timeout_s = takeover_timeout_s
        self._sessions: dict[str, JobSession] = {}
        self._lock = threading.RLock()
        #: Serialises everything that writes a job's record or switches its run.
        self._register_lock = threading.Lock()

    # --- jobs ---------------------------------------------------------------------------

    def options(self, config: Mapping[str, Any]) -> CheckpointingOptions:
        """A registration's options; bad ones are refused with a ConfigError."""
        return job_options(self._defaults, config, grace_period_s=self._grace_s)

    def stored_options(self, config: Mapping[str, Any]) -> CheckpointingOptions:
        """The options of a job's record (see ``stored_job_options``)."""
        return stored_job_options(self._defaults, config, grace_period_s=self._grace_s)

    def sessions(self) -> list[JobSession]:
        with self._lock:
            return list(self._sessions.values())

    def session(self, job_id: str) -> JobSession:
        with self._lock:
            session = self._sessions.get(job_id)
        if session is None:
            raise UnknownJobError(f"job {job_id!r} is not registered")
        return session

    def adopt(self, session: JobSession) -> None:
        """Take a job the host opened itself (a new leader resuming it)."""
        with self._lock:
            self._sessions[session.job_id] = session

    def is_current(self, session: JobSession) -> bool:
        with self._lock:
            return self._sessions.get(session.job_id) is session

    def update_record(self, session: JobSession, record: JobRecord) -> bool:
        """Persist ``record`` for ``session`` unless a registration replaced the session
        meanwhile (its record is no longer the job's); False then."""
        with self._register_lock:
            if not self.is_current(session):
                return False
            self._host.persist(record)
            session.record = record
        return True

    # --- registration -------------------------------------------------------------------

    def register(
        self,
        graph: JobGraph,
        config: Mapping[str, Any],
        *,
        replace: bool = False,
        standby: bool = False,
        address: str = "",
    ) -> Registration:
        """Register ``graph`` (idempotent for the same graph and options: the job keeps its
        coordinator). Every registration is a new driver run with a new id, persisted with
        the job's record so that the next leader too refuses every earlier run.

        ``standby``: register as the job's warm standby run instead, when the job is running
        with the same graph and options (else this run becomes the active one); it replaces
        any earlier standby. ``address``: where the run's driver process answers liveness
        probes (see ``service.driver_probe``)."""
        options = self.options(config)  # refuse bad options before any write
        run_id = uuid.uuid4().hex
        if standby:
            session = self._register_standby(graph, options, run_id, address)
            if session is not None:
                return Registration(session, run_id, "standby", session.last_seq())
        session = self._register_active(graph, config, options, run_id, address, replace)
        return Registration(session, run_id, "active", session.run_seq())

    def _register_active(
        self,
        graph: JobGraph,
        config: Mapping[str, Any],
        options: CheckpointingOptions,
        run_id: str,
        address: str,
        replace: bool,
    ) -> JobSession:
        host = self._host
        with self._register_lock:
            with self._lock:
                existing = self._sessions.get(graph.job_id)
            old = existing.record if existing else host.stored_record(graph.job_id)
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
                host.ensure_can_act()
                # Refuse the earlier run from now on, then make it last beyond this term.
                existing.coordinator.begin_run(run_id)
                existing.released = False
                record = existing.record.with_run(run_id, address)
                host.persist(record)
                existing.record = record
                log.info("job %s: driver run %s registered", graph.job_id, run_id)
                return existing
            # Refused here, naming the directory and the user, not at the first checkpoint
            # (raises the storage's PermissionDenied).
            host.storage.check_writable(graph.job_id)
            record = JobRecord(
                graph,
                dict(config),
                JobStatus.RUNNING,
                run_id=run_id,
                run_address=address,
                **({"registered_ms": old.registered_ms} if old is not None else {}),
            )
            if old is not None and only_parallelism_differs(old.graph, graph):
                # A rescale (live, or a restart at another parallelism): the request stays
                # until the driver reports it applied, and the standby stays, to adopt the
                # new parallelism when it is granted the job.
                record = record.with_rescale(old.rescale)
                if existing is not None and existing.job_status() is JobStatus.RUNNING:
                    record = record.with_standby(old.standby_run_id, old.standby_address)
            host.ensure_can_act()
            if existing is not None:
                existing.coordinator.begin_run(run_id)
            host.persist(record)
            base = existing.last_seq() if existing else host.notice_base()
            if existing is not None:
                existing.coordinator.stop(f"job {graph.job_id} registered again")
                _settle(existing)
            session = host.open_session(record, base)
            with self._lock:
                reason = host.closed_reason()
                if reason is not None:
                    session.coordinator.stop(reason)
                    raise NotLeaderError(f"leadership lost: {reason}")
                self._sessions[graph.job_id] = session
        log.info("registered job %s (%d operators), driver run %s",
                 graph.job_id, len(graph.operators), run_id)  # fmt: skip
        return session

    def _register_standby(
        self, graph: JobGraph, options: CheckpointingOptions, run_id: str, address: str
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
            # At another parallelism is fine: granted, it adopts the job's (runs.rescales).
            if (
                not only_parallelism_differs(existing.record.graph, graph)
                or existing.coordinator.options != options
            ):
                raise JobGraphConflictError(
                    f"job {graph.job_id}: a standby driver must register the active run's "
                    "graph (at any parallelism) and checkpointing options"
                )
            self._host.ensure_can_act()
            record = existing.record.with_standby(run_id, address)
            self._host.persist(record)
            existing.record = record
        log.info("job %s: standby driver run %s registered", graph.job_id, run_id)
        return existing

    def release(self, job_id: str, run_id: str) -> None:
        """A driver run ends cleanly: the active run's standby (if any) takes over at once;
        a standby that leaves is forgotten. Any other run is refused."""
        session = self.session(job_id)
        with self._register_lock:
            if session.standby_run_id and run_id == session.standby_run_id:
                self._host.ensure_can_act()
                record = session.record.with_standby("")
                self._host.persist(record)
                session.record = record
                return
            session.check_run(run_id)
            session.released = True
        log.info("job %s: driver run %s released the job", job_id, run_id)

    def grant_if_due(self, session: JobSession) -> bool:
        """End the silent (or released, or gone) active run and make the standby the
        current run: the fence refuses the old run's calls from now on."""
        if not session.takeover_due(self._takeover_timeout_s):
            return False
        with self._register_lock:
            if not self.is_current(session):
                return False
            if not session.takeover_due(self._takeover_timeout_s):
                return False
            old, standby = session.run_id, session.standby_run_id
            why = ("released it" if session.released
                   else "is gone (its process refused a probe)" if session.run_gone()
                   else "went silent")  # fmt: skip
            self._host.ensure_can_act()
            session.coordinator.begin_run(standby, due_now=True)
            record = session.record.with_standby_granted()
            self._host.persist(record)
            session.record = record
            session.granted()
        log.warning("job %s: driver run %s %s; standby run %s granted the job",
                    session.job_id, old, why, standby)  # fmt: skip
        return True

    # --- what a run says ----------------------------------------------------------------

    def heartbeat(self, job_id: str, run_id: str, after_seq: int) -> Beat:
        """The run is alive; an active run hears the notices numbered above ``after_seq``,
        a standby only whether it was granted the job."""
        session = self.session(job_id)
        role = session.heartbeat(run_id)
        if role != "active":
            return Beat(role, session.job_status(), [], session.last_seq())
        notices = session.notices(after_seq)
        return Beat(role, session.job_status(), notices, session.last_seq(),
                    instruction(session.record))  # fmt: skip

    # --- rescale requests (runs.rescales) -------------------------------------------------

    def request_rescale(self, job_id: str, parallelism: int) -> RescaleRequest:
        """Store a request to run ``job_id`` at ``parallelism`` with the job's record (it
        replaces one still pending: the last request wins); the active driver run applies
        it at its next epoch boundary. Refused for a job that is over, or a parallelism
        the job cannot run at."""
        session = self.session(job_id)
        with self._register_lock:
            status = session.job_status()
            if status not in (JobStatus.RUNNING, JobStatus.CREATED):
                raise JobNotRunningError(f"job {job_id} is {status.value}: nothing to rescale")
            request = new_request(session.record, parallelism)
            if request.state == "unchanged":
                return request
            self._host.ensure_can_act()
            record = session.record.with_rescale(request)
            self._host.persist(record)
            session.record = record
        log.info("job %s: rescale to parallelism %d requested (request %s)",
                 job_id, parallelism, request.request_id)  # fmt: skip
        return request

    def rescale_applied(
        self, job_id: str, run_id: str, request_id: str, epoch: int, checkpoint_id: int | None
    ) -> RescaleRequest | None:
        """The current run applied request ``request_id``: record when (idempotent; a
        request replaced meanwhile is left alone). Returns the job's last request."""
        session = self.session(job_id)
        with self._register_lock:
            session.check_run(run_id)
            request = session.record.rescale
            if request is None or request.request_id != request_id or not request.pending:
                return request
            self._host.ensure_can_act()
            record = session.record.with_rescale(request.applied(epoch, checkpoint_id))
            self._host.persist(record)
            session.record = record
        log.info("job %s: rescale request %s applied at parallelism %d after epoch %d, "
                 "from checkpoint %s", job_id, request_id, request.parallelism, epoch,
                 checkpoint_id)  # fmt: skip
        return record.rescale

    def acknowledge(
        self, job_id: str, checkpoint_id: int, acks: Sequence[Acknowledgement], run_id: str
    ) -> AckResult:
        """All or nothing; a result whose status is FAILED means finalisation failed: the
        checkpoint is gone and the driver drops it."""
        return self.session(job_id).coordinator.acknowledge_all(checkpoint_id, acks, run_id=run_id)

    def decline(
        self, job_id: str, checkpoint_id: int, operator_uid: str, subtask: int, reason: str,
        run_id: str,
    ) -> None:  # fmt: skip
        self.session(job_id).coordinator.decline(
            checkpoint_id, operator_uid, subtask, reason, run_id=run_id
        )

    def restore_plan(
        self,
        job_id: str,
        graph: JobGraph,
        *,
        run_id: str,
        pointer: str | None = None,
        allow_non_restored_state: bool = False,
        mode: RestoreMode | None = None,
    ) -> PlannedRestore:
        return plan_run_restore(
            self.session(job_id),
            self._host.storage,
            graph,
            run_id=run_id,
            pointer=pointer,
            allow_non_restored_state=allow_non_restored_state,
            mode=mode,
        )

    def trigger_checkpoint(self, job_id: str, run_id: str | None = None) -> int:
        session = self.session(job_id)
        if run_id is not None:
            session.check_run(run_id)
        return session.coordinator.trigger_checkpoint()

    def trigger_savepoint(
        self, job_id: str, target_dir: str | None, *, stop: bool, run_id: str | None = None
    ) -> int:
        session = self.session(job_id)
        if run_id is not None:
            session.check_run(run_id)
        return session.coordinator.trigger_savepoint(target_dir, stop=stop)


def _settle(replaced: JobSession) -> None:
    """Wait until the replaced coordinator's last checkpoint left the finaliser
    (completed, aborted, or in doubt). Only then does the new session read the store, so
    its first restore plan names the newest checkpoint there is, never one that a late
    completion of the old coordinator subsumes (and deletes) a moment after."""
    try:
        replaced.coordinator.await_finalizations()
    except TimeoutError as exc:
        raise JobNotSettledError(
            f"job {replaced.job_id}: its previous coordinator is still publishing a "
            "checkpoint; register again shortly"
        ) from exc
