"""Status answers, from the leader's coordinators or — on any replica, and in the CLI
while no coordinator answers — from ZooKeeper and storage alone.

The shapes follow Flink's REST "checkpoints" overview; a follower knows only what is
durable (the job registry, the retained checkpoints and their `_metadata`), so its counts
cover retained checkpoints and its history is empty. ``source`` says which one answered.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.metadata import MetadataError, describe_checkpoint
from sparkpoint.runs.errors import UnknownCheckpointIdError, UnknownJobError
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


class StatusReader:
    """Reads for the status endpoints; ``term`` is the leader's (None on a follower)."""

    def __init__(self, backend: Backend, storage: CheckpointStorage, term: Term | None) -> None:
        self._backend = backend
        self._storage = storage
        self._term = term if term is not None and term.ready.is_set() else None

    @property
    def source(self) -> str:
        return "leader" if self._term is not None else "zookeeper"

    def _session(self, job_id: str) -> JobSession | None:
        if self._term is None:
            return None
        try:
            return self._term.session(job_id)
        except UnknownJobError:
            return None

    def _record(self, job_id: str) -> JobRecord:
        session = self._session(job_id)
        if session is not None:
            return session.record
        record = self._backend.registry(None).get(job_id)
        if record is None:
            raise UnknownJobError(f"job {job_id!r} is not registered")
        return record

    def jobs(self) -> list[dict[str, Any]]:
        records = {r.job_id: r for r in self._backend.registry(None).list()}
        out = []
        for job_id in sorted(records):
            session = self._session(job_id)
            if session is not None:
                out.append(session.summary())
                continue
            record = records[job_id]
            out.append(
                {
                    "job_id": job_id,
                    "status": record.status.value,
                    "operators": len(record.graph.operators),
                    "registered_ms": record.registered_ms,
                    "connected": None,
                }
            )
        return out

    def job(self, job_id: str) -> dict[str, Any]:
        record = self._record(job_id)
        out = record_to_dict(record)
        session = self._session(job_id)
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
        self._record(job_id)  # 404 for an unknown job
        session = self._session(job_id)
        if session is not None:
            overview = session.coordinator.to_dict()
            retained = session.store.get_all()
        else:
            retained = self._backend.retained(job_id)
            overview = self.durable_overview(retained)
        overview["retained"] = [p.to_dict() for p in retained]
        overview["source"] = self.source
        return overview

    @staticmethod
    def durable_overview(retained: list[CheckpointPointer]) -> dict[str, Any]:
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

    def checkpoint(self, job_id: str, checkpoint_id: int) -> dict[str, Any]:
        self._record(job_id)
        session = self._session(job_id)
        found: dict[str, Any] | None = None
        if session is not None:
            for record in session.coordinator.stats.history():
                if record.checkpoint_id == checkpoint_id:
                    found = record.to_dict(subtasks=True)
            retained = session.store.get_all()
        else:
            retained = self._backend.retained(job_id)
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

    def _metadata(self, pointer: CheckpointPointer) -> dict[str, Any]:
        try:
            return describe_checkpoint(
                self._storage.read_metadata(pointer.metadata_uri, pointer.metadata_checksum)
            )
        except (StorageError, MetadataError) as exc:
            return {"error": str(exc)}
