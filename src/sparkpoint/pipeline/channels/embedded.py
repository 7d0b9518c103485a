"""A coordinator inside the driver: the driver-run lifecycle of ``sparkpoint.runs`` with a
real ``CheckpointCoordinator``, a standalone counter and store, writing checkpoints to
real storage. No service, no ZooKeeper — for single-process runs, tests and benchmarks.
A restarted driver restores from the newest complete ``chk-<id>`` on disk (``_metadata``
is written last, so that one is whole).

Driver runs behave exactly as with the service, because they are the same code: each
registration starts a run with a new id, a run that is no longer current is refused
(:class:`~sparkpoint.runs.RunSuperseded`) and changes nothing, and a standby run is
granted the job when the active one releases it or stays silent for the takeover
timeout. :meth:`EmbeddedChannel.another_run` gives a second driver in the same process
its own channel to the same jobs.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from sparkpoint.checkpoint import JobGraph
from sparkpoint.coordinator import (
    Acknowledgement,
    CheckpointCoordinator,
    CheckpointFinishedError,
    CheckpointingOptions,
    CheckpointStatus,
    SupersededRunError,
    UnknownCheckpointError,
)
from sparkpoint.counter import StandaloneCheckpointIDCounter
from sparkpoint.runs.job_runs import JobRuns
from sparkpoint.runs.messages import Ack, Restored, RestoreMode, RunNotice, RunSuperseded
from sparkpoint.runs.session import JobSession
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import JobRecord, StandaloneCompletedCheckpointStore

#: How often a waiting standby asks whether it was granted the job.
_GRANT_POLL_S = 0.05


class _ProcessHost:
    """The jobs of one driver process: nothing outlives it, nobody else may act on them."""

    def __init__(self, storage: CheckpointStorage, *, heartbeat_timeout_s: float) -> None:
        self.storage = storage
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._records: dict[str, JobRecord] = {}
        self.runs: JobRuns | None = None

    def ensure_can_act(self) -> None:
        """A driver's own coordinator always may."""

    def closed_reason(self) -> str | None:
        return None

    def stored_record(self, job_id: str) -> JobRecord | None:
        return self._records.get(job_id)

    def persist(self, record: JobRecord) -> None:
        self._records[record.job_id] = record

    def notice_base(self) -> int:
        return 0

    def open_session(self, record: JobRecord, notice_base: int) -> JobSession:
        assert self.runs is not None
        options = self.runs.options(record.checkpoint_config)
        counter = StandaloneCheckpointIDCounter()
        store = StandaloneCompletedCheckpointStore(options.max_retained)
        coordinator = CheckpointCoordinator(
            record.graph, options, counter=counter, store=store, storage=self.storage,
            run_id=record.run_id or None,
        )  # fmt: skip
        coordinator.start()
        return JobSession(record, coordinator, counter, store, notice_base=notice_base,
                          heartbeat_timeout_s=self._heartbeat_timeout_s)  # fmt: skip


class EmbeddedChannel:
    """``options``: checkpointing options by field or Flink key (``interval_ms`` …);
    ``driver_takeover_timeout_s``: how long an active run may be silent before a standby
    run (of :meth:`another_run`) is granted the job."""

    def __init__(
        self,
        checkpoint_dir: str,
        *,
        savepoint_dir: str | None = None,
        inline_threshold: int | None = None,
        driver_takeover_timeout_s: float = 3.0,
        **options: Any,
    ) -> None:
        extra = {} if inline_threshold is None else {"inline_threshold": inline_threshold}
        self.storage = CheckpointStorage(checkpoint_dir, savepoint_dir=savepoint_dir, **extra)
        self.options = CheckpointingOptions.from_dict(options)
        host = _ProcessHost(self.storage, heartbeat_timeout_s=driver_takeover_timeout_s)
        self._runs = JobRuns(
            host,
            option_defaults=dataclasses.asdict(self.options),
            takeover_timeout_s=driver_takeover_timeout_s,
        )
        host.runs = self._runs
        self._owner = True
        self._job_id: str | None = None
        self.run_id: str | None = None
        self.standby = False
        self._seq = 0
        self._closed = threading.Event()

    def another_run(self) -> EmbeddedChannel:
        """A channel for another driver run of the same jobs (in this process); registering
        it supersedes this channel's run, or stands by for it."""
        other = EmbeddedChannel.__new__(EmbeddedChannel)
        other.storage, other.options, other._runs = self.storage, self.options, self._runs
        other._owner = False
        other._job_id, other.run_id, other.standby, other._seq = None, None, False, 0
        other._closed = threading.Event()
        return other

    @property
    def coordinator(self) -> CheckpointCoordinator | None:
        """The coordinator of this channel's job (None before registering)."""
        if self._job_id is None:
            return None
        return self._runs.session(self._job_id).coordinator

    def _run(self) -> tuple[str, str]:
        if self._job_id is None or self.run_id is None:
            raise RuntimeError("register the job first")
        return self._job_id, self.run_id

    @contextmanager
    def _as_run(self) -> Iterator[None]:
        try:
            yield
        except SupersededRunError as exc:
            raise RunSuperseded(str(exc)) from exc

    def register(self, graph: JobGraph, *, standby: bool = False) -> str:
        registration = self._runs.register(graph, {}, standby=standby)
        self._job_id, self.run_id = graph.job_id, registration.run_id
        self.standby = registration.role == "standby"
        # Notices from before this run (triggers of an earlier run) are not ours.
        self._seq = registration.notification_seq
        return registration.run_id

    def wait_for_grant(self) -> list[RunNotice]:
        while self.standby and not self._closed.is_set():
            beat = self._beat()
            if beat is not None:
                return beat
            self._closed.wait(_GRANT_POLL_S)  # a polling interval, as over the network
        return []

    def _beat(self) -> list[RunNotice] | None:
        """One heartbeat; None while this run is a standby not (yet) granted the job."""
        job_id, run_id = self._run()
        session = self._runs.session(job_id)
        self._runs.grant_if_due(session)
        session.coordinator.tick(allow_trigger=True)
        with self._as_run():
            beat = self._runs.heartbeat(job_id, run_id, self._seq)
        if beat.role == "standby":
            return None
        self.standby = False
        for notice in beat.notices:
            self._seq = max(self._seq, notice.seq)
        return beat.notices

    def release(self) -> None:
        if self.run_id is None:
            return
        job_id, run_id = self._run()
        with suppress(SupersededRunError):
            self._runs.release(job_id, run_id)

    def restore(
        self, graph: JobGraph, pointer: str | None = None, mode: RestoreMode | None = None
    ) -> Restored | None:
        job_id, run_id = self._run()
        if pointer is None and self.storage.list_checkpoints(graph.job_id, completed_only=True):
            # A restarted driver: the newest complete checkpoint on disk (this process's
            # store starts empty, the files are what outlived the last one) — the job's
            # own latest, claimed as a restart from the store's latest would be.
            pointer = self.storage.job_directory(graph.job_id)
            mode = mode or RestoreMode.CLAIM
        with self._as_run():
            planned = self._runs.restore_plan(
                job_id, graph, run_id=run_id, pointer=pointer, mode=mode
            )
        return planned.restored

    def heartbeat(self) -> list[RunNotice]:
        return self._beat() or []

    def acknowledge(self, checkpoint_id: int, acks: Sequence[Ack]) -> bool:
        job_id, run_id = self._run()
        try:
            with self._as_run():
                result = self._runs.acknowledge(
                    job_id, checkpoint_id,
                    [Acknowledgement(uid, i, state) for uid, i, state in acks], run_id,
                )  # fmt: skip
        except (UnknownCheckpointError, CheckpointFinishedError):
            return False
        return result.status is not CheckpointStatus.FAILED

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        job_id, run_id = self._run()
        with suppress(UnknownCheckpointError, CheckpointFinishedError), self._as_run():
            self._runs.decline(job_id, checkpoint_id, operator_uid, subtask, reason, run_id)

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        job_id, run_id = self._run()
        with self._as_run():
            return self._runs.trigger_savepoint(job_id, target_dir, stop=stop, run_id=run_id)

    def trigger_checkpoint(self) -> int:
        job_id, run_id = self._run()
        with self._as_run():
            return self._runs.trigger_checkpoint(job_id, run_id)

    def close(self) -> None:
        self._closed.set()
        if self._owner:
            for session in self._runs.sessions():
                session.coordinator.close()
