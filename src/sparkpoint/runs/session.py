"""One job while a coordinator leads it: its coordinator, driver liveness and notices.

Notices are numbered so they only rise across leaders: a coordinator numbers its own from
1, and a session adds a base — the leadership epoch shifted left by 32 bits
(:func:`term_base`: a new term always numbers above the old), or, for a coordinator that
replaced another within the term, the last number the replaced one gave out.
"""

from __future__ import annotations

import time
from typing import Any

from sparkpoint.checkpoint import JobStatus
from sparkpoint.coordinator import (
    AbortNotice,
    CheckpointCoordinator,
    CompletionNotice,
    Notice,
    TriggerNotice,
)
from sparkpoint.counter import CheckpointIDCounter
from sparkpoint.runs.messages import (
    CheckpointAborted,
    CheckpointCompleted,
    RunNotice,
    TriggerCheckpoint,
)
from sparkpoint.store import CompletedCheckpointStore, JobRecord


def term_base(epoch: int) -> int:
    """Where the notice numbers of a term begin."""
    return epoch << 32


class JobSession:
    """A job's coordinator in the current term, and when its driver was last heard of.

    A job whose driver has not heartbeated within ``heartbeat_timeout_s`` is disconnected:
    its checkpoints still expire, but none is triggered (nobody would take it). A new
    term starts every job disconnected until its driver's next heartbeat.

    A job may also have one warm standby driver run. It heartbeats as such (and is told
    so), takes part in nothing, and is granted the run when the active run is silent for
    the driver takeover timeout, released it, or a liveness probe found its process gone
    (:meth:`takeover_due`; the term grants).
    """

    def __init__(
        self,
        record: JobRecord,
        coordinator: CheckpointCoordinator,
        counter: CheckpointIDCounter,
        store: CompletedCheckpointStore,
        *,
        notice_base: int,
        heartbeat_timeout_s: float,
    ) -> None:
        self.record = record
        self.coordinator = coordinator
        self.counter = counter
        self.store = store
        self.notice_base = notice_base
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self._last_heartbeat: float | None = None
        self._opened = time.monotonic()
        self._standby_heartbeat: float | None = None
        #: The active run said it is ending (a clean exit): its standby may take over now.
        self.released = False
        #: A run whose process a liveness probe found gone (its standby may take over now).
        self._gone_run: str | None = None
        #: Notices up to here belong to runs before the last grant: never sent again.
        self._granted_after = 0
        #: The status last written to the registry (to write only changes).
        self.persisted_status = record.status

    @property
    def job_id(self) -> str:
        return self.record.job_id

    @property
    def run_id(self) -> str | None:
        """The job's current driver run."""
        return self.coordinator.run_id

    def check_run(self, run_id: str) -> None:
        """Refuse a driver run that is not the current one (``SupersededRunError``)."""
        self.coordinator.check_run(run_id)

    @property
    def standby_run_id(self) -> str:
        """The job's standby driver run ("" when none)."""
        return self.record.standby_run_id

    def heartbeat(self, run_id: str) -> str:
        """The current run (or the standby) is alive: returns its role, "active" or
        "standby". Any other run's heartbeat is refused and marks nothing."""
        if self.standby_run_id and run_id == self.standby_run_id:
            self._standby_heartbeat = time.monotonic()
            return "standby"
        self.check_run(run_id)
        self._last_heartbeat = time.monotonic()
        return "active"

    def standby_alive(self) -> bool:
        last = self._standby_heartbeat
        return last is not None and time.monotonic() - last <= self.heartbeat_timeout_s

    def takeover_due(self, timeout_s: float) -> bool:
        """Whether the standby should be granted the run now: it is heartbeating, and the
        active run released it or has been silent for ``timeout_s`` (since this term
        opened the job, if it never heartbeated in this term)."""
        if not self.standby_run_id or not self.standby_alive():
            return False
        if self.released or self.run_gone():
            return True
        return self.silent_for() > timeout_s

    def silent_for(self) -> float:
        """Seconds since the current run was last heard (since this term opened the job,
        or granted it, if not yet)."""
        last = self._last_heartbeat if self._last_heartbeat is not None else self._opened
        return time.monotonic() - last

    def mark_gone(self, run_id: str) -> bool:
        """A probe found ``run_id``'s process gone; True if it is still the current run."""
        if run_id != self.run_id:
            return False
        self._gone_run = run_id
        return True

    def run_gone(self) -> bool:
        return self._gone_run is not None and self._gone_run == self.run_id

    def granted(self) -> None:
        """The standby became the active run: it is connected once it heartbeats."""
        self._last_heartbeat = None
        self._opened = time.monotonic()
        self._standby_heartbeat = None
        self.released = False
        self._gone_run = None
        self._granted_after = self.run_seq()

    def connected(self) -> bool:
        last = self._last_heartbeat
        return last is not None and time.monotonic() - last <= self.heartbeat_timeout_s

    def last_seq(self) -> int:
        return self.notice_base + self.coordinator.outbox.last_seq

    def run_seq(self) -> int:
        """Where the current run's notices begin: what its registration (or grant)
        answers, so that a trigger created while the run was being registered — after
        the switch, before the reply — still reaches it."""
        return self.notice_base + self.coordinator.run_started_seq

    def notices(self, after_seq: int) -> list[RunNotice]:
        """The notices numbered above ``after_seq`` (never those of runs before a grant)."""
        local = max(max(after_seq, self._granted_after) - self.notice_base, 0)
        return [numbered(n, self.notice_base) for n in self.coordinator.notifications_since(local)]

    def job_status(self) -> JobStatus:
        return self.coordinator.job_status

    def summary(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "status": self.coordinator.job_status.value,
            "operators": len(self.record.graph.operators),
            "registered_ms": self.record.registered_ms,
            "connected": self.connected(),
            "driver_run": self.run_id or "",
            "standby_run": self.standby_run_id,
            # The standby heartbeats: a takeover would find it warm.
            "standby_ready": bool(self.standby_run_id) and self.standby_alive(),
        }


def numbered(notice: Notice, base: int) -> RunNotice:
    """A coordinator's notice as drivers see it, its number shifted by ``base``."""
    seq = base + notice.seq
    if isinstance(notice, TriggerNotice):
        return TriggerCheckpoint(notice.checkpoint_id, notice.kind, notice.directory,
                                 notice.stop, seq, notice.timestamp_ms)  # fmt: skip
    if isinstance(notice, CompletionNotice):
        return CheckpointCompleted(notice.checkpoint_id, notice.kind, seq, notice.metadata_uri,
                                   notice.timestamp_ms, notice.stop)  # fmt: skip
    if isinstance(notice, AbortNotice):
        return CheckpointAborted(notice.checkpoint_id, notice.reason, seq, notice.kind,
                                 notice.timestamp_ms, notice.stop)  # fmt: skip
    raise TypeError(f"not a coordinator notice: {notice!r}")
