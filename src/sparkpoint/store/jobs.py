"""The registry of submitted jobs: ``jobs/<job-id>`` holds the graph and its config, the
job's driver runs, and the last rescale asked of it (pending until its driver reports it
applied: in ZooKeeper, so a change of leader loses no request)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kazoo.exceptions import NoNodeError

from sparkpoint.checkpoint import InvalidCheckpointValue, JobGraph, JobStatus
from sparkpoint.ha import ConflictError, Fence, HAError, Op, ZooKeeperConnection, translate
from sparkpoint.ha.fencing import missing_parent_ops


@dataclass(frozen=True, slots=True)
class RescaleRequest:
    """A rescale asked of a running job (docs/operations.md, "Rescaling a running job").
    ``state`` is "pending" until the job's driver reports it applied: then ``epoch`` (the
    driver run's epoch after which it runs at ``parallelism``) and ``checkpoint_id`` (the
    checkpoint it was planned from) say when it took effect."""

    request_id: str
    parallelism: int
    requested_ms: int
    state: str = "pending"
    epoch: int | None = None
    checkpoint_id: int | None = None
    applied_ms: int | None = None

    @property
    def pending(self) -> bool:
        return self.state == "pending"

    def applied(self, epoch: int, checkpoint_id: int | None) -> RescaleRequest:
        return replace(
            self,
            state="applied",
            epoch=epoch,
            checkpoint_id=checkpoint_id,
            applied_ms=int(time.time() * 1000),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "parallelism": self.parallelism,
            "requested_ms": self.requested_ms,
            "state": self.state,
            "epoch": self.epoch,
            "checkpoint_id": self.checkpoint_id,
            "applied_ms": self.applied_ms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RescaleRequest:
        def number(key: str) -> int | None:
            return None if data.get(key) is None else int(data[key])

        return cls(
            request_id=str(data["request_id"]),
            parallelism=int(data["parallelism"]),
            requested_ms=int(data.get("requested_ms", 0)),
            state=str(data.get("state", "pending")),
            epoch=number("epoch"),
            checkpoint_id=number("checkpoint_id"),
            applied_ms=number("applied_ms"),
        )


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A submitted job: what the driver registered, and where the job stands."""

    graph: JobGraph
    checkpoint_config: dict[str, Any] = field(default_factory=dict)
    status: JobStatus = JobStatus.RUNNING
    status_reason: str = ""
    registered_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    #: The current driver run: the next leader refuses every other run's calls.
    run_id: str = ""
    #: A warm standby driver run waiting to be granted the job ("" when none).
    standby_run_id: str = ""
    #: Where each run's driver process listens for liveness probes (``host:port``; ""
    #: when it gave none): a refused connection there tells the leader the process is gone.
    run_address: str = ""
    standby_address: str = ""
    #: The last rescale asked of the job (None: never asked).
    rescale: RescaleRequest | None = None

    @property
    def job_id(self) -> str:
        return self.graph.job_id

    def with_status(self, status: JobStatus, reason: str = "") -> JobRecord:
        return replace(self, status=status, status_reason=reason)

    def with_run(self, run_id: str, address: str = "") -> JobRecord:
        """With ``run_id`` (probed at ``address``) current; the standby stays."""
        return replace(self, run_id=run_id, run_address=address)

    def with_standby(self, standby_run_id: str, address: str = "") -> JobRecord:
        return replace(self, standby_run_id=standby_run_id, standby_address=address)

    def with_standby_granted(self) -> JobRecord:
        """The standby is the current run; no standby is left."""
        return replace(
            self,
            run_id=self.standby_run_id,
            run_address=self.standby_address,
            standby_run_id="",
            standby_address="",
        )

    def with_rescale(self, request: RescaleRequest | None) -> JobRecord:
        return replace(self, rescale=request)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "graph": self.graph.to_dict(),
                "checkpoint_config": self.checkpoint_config,
                "status": self.status.value,
                "status_reason": self.status_reason,
                "registered_ms": self.registered_ms,
                "run_id": self.run_id,
                "standby_run_id": self.standby_run_id,
                "run_address": self.run_address,
                "standby_address": self.standby_address,
                **({"rescale": self.rescale.to_dict()} if self.rescale else {}),
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> JobRecord:
        try:
            data = json.loads(raw.decode())
            return cls(
                graph=JobGraph.from_dict(data["graph"]),
                checkpoint_config=dict(data.get("checkpoint_config", {})),
                status=JobStatus(data.get("status", JobStatus.RUNNING.value)),
                status_reason=str(data.get("status_reason", "")),
                registered_ms=int(data.get("registered_ms", 0)),
                run_id=str(data.get("run_id", "")),
                standby_run_id=str(data.get("standby_run_id", "")),
                run_address=str(data.get("run_address", "")),
                standby_address=str(data.get("standby_address", "")),
                rescale=RescaleRequest.from_dict(data["rescale"]) if data.get("rescale") else None,
            )
        except (ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, InvalidCheckpointValue):
                raise
            raise InvalidCheckpointValue(f"malformed job record: {exc!r}") from exc


class JobRegistry(Protocol):
    def put(self, record: JobRecord) -> None: ...

    def get(self, job_id: str) -> JobRecord | None: ...

    def list(self) -> list[JobRecord]: ...

    def job_ids(self) -> list[str]:
        """The registered jobs' ids, sorted, without reading their records."""
        ...

    def remove(self, job_id: str) -> None: ...


class StandaloneJobRegistry:
    def __init__(self) -> None:
        self._jobs: dict[str, JobRecord] = {}
        self._lock = threading.Lock()

    def put(self, record: JobRecord) -> None:
        with self._lock:
            self._jobs[record.job_id] = record

    def get(self, job_id: str) -> JobRecord | None:
        with self._lock:
            return self._jobs.get(job_id)

    def list(self) -> list[JobRecord]:
        with self._lock:
            return [self._jobs[k] for k in sorted(self._jobs)]

    def job_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._jobs)

    def remove(self, job_id: str) -> None:
        with self._lock:
            self._jobs.pop(job_id, None)


class ZooKeeperJobRegistry:
    """Jobs in ZooKeeper; writes are fenced (``fence`` None means read-only)."""

    def __init__(self, conn: ZooKeeperConnection, fence: Fence | None) -> None:
        self._conn = conn
        self._fence = fence
        #: Paths of job records that could not be decoded on the last list().
        self.unreadable: list[str] = []

    def put(self, record: JobRecord) -> None:
        fence = self._require_fence()
        path = self._conn.paths.job(record.job_id)
        for _ in range(100):
            with translate.reads(f"reading {path}"):
                stat = self._conn.retry(self._conn.client.exists, path)
            ops = (
                [*missing_parent_ops(self._conn, path), Op.create(path, record.to_bytes())]
                if stat is None
                else [Op.set(path, record.to_bytes(), version=stat.version)]
            )
            try:
                fence.commit(ops, f"registering job {record.job_id}")
                return
            except ConflictError:
                continue  # changed under us: read again
        raise HAError(f"could not write job {record.job_id}: too many concurrent changes")

    def get(self, job_id: str) -> JobRecord | None:
        path = self._conn.paths.job(job_id)
        with translate.reads(f"reading {path}"):
            try:
                raw, _ = self._conn.retry(self._conn.client.get, path)
            except NoNodeError:
                return None
        return JobRecord.from_bytes(raw)

    def job_ids(self) -> list[str]:
        with translate.reads("listing jobs"):
            try:
                names = self._conn.retry(self._conn.client.get_children, self._conn.paths.jobs)
            except NoNodeError:
                return []
        return sorted(names)

    def list(self) -> list[JobRecord]:
        records, unreadable = [], []
        for name in self.job_ids():
            try:
                record = self.get(name)
            except InvalidCheckpointValue:
                unreadable.append(self._conn.paths.job(name))
                continue
            if record is not None:
                records.append(record)
        self.unreadable = unreadable
        return records

    def remove(self, job_id: str) -> None:
        fence = self._require_fence()
        with contextlib.suppress(ConflictError):  # already gone is fine
            fence.commit([Op.delete(self._conn.paths.job(job_id))], f"removing job {job_id}")

    def _require_fence(self) -> Fence:
        if self._fence is None:
            raise HAError("the job registry was opened read-only")
        return self._fence
