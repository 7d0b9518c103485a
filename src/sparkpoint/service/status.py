"""The one status model: what the status API, the web UI and the CLI's status commands
answer, from the leader's live sessions or — on a follower, and in the CLI while no
coordinator answers — from ZooKeeper and storage alone.

Each request reads a job once (:class:`JobState`): on the leader its session, with no
ZooKeeper read for the record; elsewhere its record from the registry. The shapes follow
Flink's REST "checkpoints" overview; a follower knows only what is durable (the job
registry, the retained checkpoints and their `_metadata`), so its counts cover retained
checkpoints and its history is empty. ``source`` says which one answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import CheckpointPointer, InvalidCheckpointValue
from sparkpoint.metadata import MetadataError, describe_checkpoint
from sparkpoint.runs.errors import UnknownCheckpointIdError, UnknownJobError
from sparkpoint.runs.rescales import graph_max_parallelism, graph_parallelism
from sparkpoint.runs.session import JobSession
from sparkpoint.service.backend import Backend
from sparkpoint.service.term import Term
from sparkpoint.storage import CheckpointStorage, StorageError
from sparkpoint.store import JobRecord


def record_to_dict(record: JobRecord) -> dict[str, Any]:
    return {
        "job_id": record.job_id,
        "status": record.status.value,
        "status_reason": record.status_reason,
        "registered_ms": record.registered_ms,
        "operators": len(record.graph.operators),
        "graph": record.graph.to_dict(),
        "checkpoint_config": record.checkpoint_config,
        "parallelism": graph_parallelism(record.graph),
        "max_parallelism": graph_max_parallelism(record.graph),
        # The last rescale asked of the job (None: never asked).
        "rescale": record.rescale.to_dict() if record.rescale else None,
    }


def pointer_record(pointer: CheckpointPointer) -> dict[str, Any]:
    """A retained pointer shaped like a history entry of the overview."""
    return {
        "id": pointer.checkpoint_id,
        "status": "COMPLETED",
        "is_savepoint": pointer.is_savepoint,
        "trigger_timestamp": pointer.trigger_timestamp_ms,
        "latest_ack_timestamp": None,
        "completion_timestamp": pointer.completion_timestamp_ms,
        "failure_timestamp": None,
        "failure_message": None,
        "state_size": pointer.state_size,
        "checkpointed_size": pointer.checkpointed_size,
        "end_to_end_duration": pointer.duration_ms,
        "num_subtasks": None,
        "num_acknowledged_subtasks": None,
        "external_path": pointer.metadata_uri,
    }


def durable_overview(retained: list[CheckpointPointer]) -> dict[str, Any]:
    """The overview a follower can give: counts and latest of the retained checkpoints."""
    checkpoints = [p for p in retained if not p.is_savepoint]
    return {
        "counts": {
            "restored": 0,
            "total": len(retained),
            "in_progress": 0,
            "completed": len(retained),
            "failed": 0,
        },
        "latest": {
            "completed": pointer_record(checkpoints[-1]) if checkpoints else None,
            "savepoint": None,
            "failed": None,
            "restored": None,
        },
        "history": [],
    }


@dataclass(frozen=True, slots=True)
class JobState:
    """One job as a request read it: its record and, on the leader, its live session."""

    record: JobRecord
    session: JobSession | None

    @property
    def job_id(self) -> str:
        return self.record.job_id

    def driver_runs(self) -> tuple[str | None, str | None]:
        """The current and the standby driver run (None when there is none)."""
        if self.session is not None:
            return self.session.run_id or None, self.session.standby_run_id or None
        return self.record.run_id or None, self.record.standby_run_id or None


class StatusReader:
    """Reads for the status endpoints, the UI and the CLI; ``term`` is the leader's (None
    on a follower and in the CLI). ``retained`` reads a job's retained checkpoints where
    no session holds them (default: a fresh read from the backend; the UI passes its
    cache)."""

    def __init__(
        self,
        backend: Backend,
        storage: CheckpointStorage,
        term: Term | None,
        *,
        retained: Callable[[str], list[CheckpointPointer]] | None = None,
    ) -> None:
        self._backend = backend
        self._storage = storage
        self._term = term if term is not None and term.ready.is_set() else None
        self._durable_retained = retained or backend.retained

    @property
    def source(self) -> str:
        return "leader" if self._term is not None else "zookeeper"

    def leader(self) -> dict[str, Any]:
        """The leader as published in ZooKeeper and every contender in the election."""
        return {"leader": self._backend.leader_info(), "contenders": self._backend.contenders()}

    # --- reading each job once ------------------------------------------------------------

    def _session(self, job_id: str) -> JobSession | None:
        if self._term is None:
            return None
        try:
            return self._term.session(job_id)
        except UnknownJobError:
            return None

    def states(self) -> list[JobState]:
        """Every registered job, by id; a record is read only for a job without a session."""
        registry = self._backend.registry(None)
        out = []
        for job_id in registry.job_ids():
            session = self._session(job_id)
            if session is not None:
                out.append(JobState(session.record, session))
                continue
            try:
                record = registry.get(job_id)
            except InvalidCheckpointValue:  # undecodable: the registry's list skips it too
                continue
            if record is not None:
                out.append(JobState(record, None))
        return out

    def state(self, job_id: str) -> JobState:
        session = self._session(job_id)
        if session is not None:
            return JobState(session.record, session)
        record = self._backend.registry(None).get(job_id)
        if record is None:
            raise UnknownJobError(f"job {job_id!r} is not registered")
        return JobState(record, None)

    def retained(self, state: JobState) -> list[CheckpointPointer]:
        """The job's retained checkpoints, oldest first."""
        if state.session is not None:
            return state.session.store.get_all()
        return self._durable_retained(state.job_id)

    # --- the answers ----------------------------------------------------------------------

    def jobs(self) -> list[dict[str, Any]]:
        return [self.summary(state) for state in self.states()]

    @staticmethod
    def summary(state: JobState) -> dict[str, Any]:
        if state.session is not None:
            return state.session.summary()
        record = state.record
        return {
            "job_id": record.job_id,
            "status": record.status.value,
            "operators": len(record.graph.operators),
            "registered_ms": record.registered_ms,
            "connected": None,
        }

    def job(self, job_id: str) -> dict[str, Any]:
        return self.job_view(self.state(job_id))

    def job_view(self, state: JobState) -> dict[str, Any]:
        record, session = state.record, state.session
        out = record_to_dict(record)
        if session is not None:
            out.update(
                status=session.job_status().value,
                status_reason=session.coordinator.failure_reason or record.status_reason,
                connected=session.connected(),
                options=session.coordinator.options.to_dict(),
            )
        out["source"] = self.source
        return out

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        overview, _ = self.overview(self.state(job_id))
        return overview

    def overview(self, state: JobState) -> tuple[dict[str, Any], list[CheckpointPointer]]:
        """The checkpoints overview of the job, and the retained pointers it lists."""
        retained = self.retained(state)
        if state.session is not None:
            overview = state.session.coordinator.to_dict()
        else:
            overview = durable_overview(retained)
        overview["retained"] = [p.to_dict() for p in retained]
        overview["source"] = self.source
        return overview, retained

    def history(self, job_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The recent history (failed and running ones too, on the leader) joined with every
        retained checkpoint, newest first, each saying whether it is retained; and the
        overview it came with."""
        overview, retained = self.overview(self.state(job_id))
        entries = {int(e["id"]): e for e in overview["history"]}
        for pointer in retained:
            entries.setdefault(pointer.checkpoint_id, pointer_record(pointer))
        retained_ids = {p.checkpoint_id for p in retained}
        for cid, entry in entries.items():
            entry["retained"] = cid in retained_ids
        return [entries[k] for k in sorted(entries, reverse=True)], overview

    def checkpoint(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        state = self.state(job_id)
        found: dict[str, Any] | None = None
        if state.session is not None:
            for record in state.session.coordinator.stats.history():
                if record.checkpoint_id == checkpoint_id:
                    found = record.to_dict(subtasks=True)
        retained = self.retained(state)
        pointer = next((p for p in retained if p.checkpoint_id == checkpoint_id), None)
        if pointer is not None:
            found = found or pointer_record(pointer)
            found["retained"] = True
            found["pointer"] = pointer.to_dict()
            found["metadata"] = self._metadata(pointer)
        if found is None:
            raise UnknownCheckpointIdError(
                f"checkpoint {checkpoint_id} of job {job_id!r} is neither retained nor in the "
                "recent history"
            )
        found.setdefault("retained", False)
        found["source"] = self.source
        return found

    def retained_pointer(self, state: JobState, checkpoint_id: int | None) -> CheckpointPointer:
        """A retained checkpoint of the job (None: the newest)."""
        retained = self.retained(state)
        job_id = state.job_id
        if checkpoint_id is None:
            if not retained:
                raise UnknownCheckpointIdError(f"job {job_id!r} retains no checkpoint")
            return retained[-1]
        for pointer in retained:
            if pointer.checkpoint_id == checkpoint_id:
                return pointer
        raise UnknownCheckpointIdError(
            f"checkpoint {checkpoint_id} of job {job_id!r} is not retained"
        )

    def _metadata(self, pointer: CheckpointPointer) -> dict[str, Any]:
        try:
            return describe_checkpoint(
                self._storage.read_metadata(pointer.metadata_uri, pointer.metadata_checksum)
            )
        except (StorageError, MetadataError) as exc:
            return {"error": str(exc)}
