"""A coordinator inside the driver: the driver-run lifecycle of ``sparkpoint.runs`` with a
real ``CheckpointCoordinator``, a standalone counter and store, writing checkpoints to
real storage. No service, no ZooKeeper — for single-process runs, tests and benchmarks.
A restarted driver restores from the newest complete ``chk-<id>`` on disk (``_metadata``
is written last, so that one is whole) — or from the job's last stop-with-savepoint when
that is newer: its sinks committed there, so nothing older may be replayed. What outlives
the process is kept beside the checkpoints, in the job's directory: the checkpoint-id
counter (``_next-checkpoint-id/<id>``: a restarted driver never hands out an id an
earlier one used, a savepoint's included, which no ``chk-<id>`` records) and each
stop-with-savepoint (``_stopped-with-savepoint/<id>``, holding its ``_metadata`` URI,
written before the driver hears of the completion and commits).

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

from sparkpoint.checkpoint import JobGraph, JobStatus, validate_checkpoint_id
from sparkpoint.coordinator import (
    Acknowledgement,
    CheckpointCoordinator,
    CheckpointFinishedError,
    CheckpointingOptions,
    CheckpointStatus,
    SupersededRunError,
    UnknownCheckpointError,
)
from sparkpoint.counter.api import INITIAL_CHECKPOINT_ID
from sparkpoint.runs.job_runs import JobRuns
from sparkpoint.runs.messages import (
    Ack,
    CheckpointCompleted,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
)
from sparkpoint.runs.session import JobSession
from sparkpoint.storage import CheckpointStorage, FileAlreadyExists, FileSystem
from sparkpoint.storage.uri import parse
from sparkpoint.store import JobRecord, RescaleRequest, StandaloneCompletedCheckpointStore

#: How often a waiting standby asks whether it was granted the job.
_GRANT_POLL_S = 0.05
#: Directories in the job's checkpoint directory (see the module docstring).
_COUNTER_DIR = "_next-checkpoint-id"
_STOPS_DIR = "_stopped-with-savepoint"


def _id_name(checkpoint_id: int) -> str:
    return f"{checkpoint_id:020d}"


def _ids_in(fs: FileSystem, directory: str) -> dict[int, str]:
    """id → path of the files named by an id in ``directory`` (none if it is missing)."""
    if not fs.exists(directory):
        return {}
    return {int(e.name): e.path for e in fs.list(directory) if e.name.isdigit()}


class _DurableCounter:
    """The checkpoint-id counter of a job of the embedded coordinator, kept in the job's
    directory: each id is recorded before it is handed out, so the next process goes on
    above it."""

    def __init__(self, storage: CheckpointStorage, job_id: str) -> None:
        directory = storage.job_directory(job_id)
        self._fs = storage.filesystem(directory)
        self._dir = str(parse(directory).child(_COUNTER_DIR))
        self._fs.mkdirs(self._dir)
        self._next = max(_ids_in(self._fs, self._dir), default=INITIAL_CHECKPOINT_ID)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Read at construction."""

    def shutdown(self, job_status: JobStatus) -> None:
        """Kept whatever the status: a later process of the job goes on above it."""

    def get_and_increment(self) -> int:
        with self._lock:
            current = self._next
            self._record(current + 1)
            return current

    def get(self) -> int:
        with self._lock:
            return self._next

    def set_count(self, new_count: int) -> None:
        validate_checkpoint_id(new_count)
        with self._lock:
            self._record(new_count)

    def _record(self, next_id: int) -> None:
        """Write ``next_id`` (then drop the smaller ones: the largest file is the value)."""
        with suppress(FileAlreadyExists):
            self._fs.write_atomic(str(parse(self._dir).child(_id_name(next_id))), b"")
        self._next = next_id
        for checkpoint_id, path in _ids_in(self._fs, self._dir).items():
            if checkpoint_id < next_id:
                self._fs.delete(path)


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
        counter = _DurableCounter(self.storage, record.job_id)
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
            if isinstance(notice, CheckpointCompleted) and notice.stop:
                self._record_stop(job_id, notice)
        return [*beat.notices, *([beat.rescale] if beat.rescale else [])]

    def _record_stop(self, job_id: str, notice: CheckpointCompleted) -> None:
        """Remember a completed stop-with-savepoint before the driver commits at it: a
        driver restarted after that commit restores it, never an older checkpoint."""
        directory = parse(self.storage.job_directory(job_id)).child(_STOPS_DIR)
        fs = self.storage.filesystem(str(directory))
        fs.mkdirs(str(directory))
        with suppress(FileAlreadyExists):
            fs.write_atomic(
                str(directory.child(_id_name(notice.checkpoint_id))), notice.metadata_uri.encode()
            )

    def _newest_restorable(self, job_id: str) -> str | None:
        """The newest complete checkpoint on disk or the last stop-with-savepoint,
        whichever is newer (None: neither)."""
        job_directory = self.storage.job_directory(job_id)
        checkpoints = self.storage.list_checkpoints(job_id, completed_only=True)
        stops_dir = str(parse(job_directory).child(_STOPS_DIR))
        fs = self.storage.filesystem(stops_dir)
        stops = _ids_in(fs, stops_dir)
        if stops and max(stops) > max(checkpoints, default=0):
            return fs.read(stops[max(stops)]).decode()
        return job_directory if checkpoints else None

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
        if pointer is None:
            # A restarted driver: what outlived the last process on disk (this process's
            # store starts empty). The job's own latest checkpoint is claimed, as a restart
            # from the store's latest would be; a stop-with-savepoint is restored no-claim.
            pointer = self._newest_restorable(graph.job_id)
            if pointer == self.storage.job_directory(graph.job_id):
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

    def request_rescale(self, parallelism: int) -> RescaleRequest:
        """Ask this job to run at ``parallelism`` (as the REST API's rescale request does):
        its driver applies it at the next epoch boundary."""
        job_id, _ = self._run()
        return self._runs.request_rescale(job_id, parallelism)

    def rescale_request(self) -> RescaleRequest | None:
        """The job's last rescale request, as its record holds it."""
        job_id, _ = self._run()
        return self._runs.session(job_id).record.rescale

    def rescaled(self, request_id: str, epoch: int, checkpoint_id: int | None) -> None:
        job_id, run_id = self._run()
        with self._as_run():
            self._runs.rescale_applied(job_id, run_id, request_id, epoch, checkpoint_id)

    def trigger_checkpoint(self) -> int:
        job_id, run_id = self._run()
        with self._as_run():
            return self._runs.trigger_checkpoint(job_id, run_id)

    def close(self) -> None:
        self._closed.set()
        if self._owner:
            for session in self._runs.sessions():
                session.coordinator.close()
