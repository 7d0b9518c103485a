"""The latest progress each job's driver reported in its heartbeats (records/s, epoch,
source lag), kept by the replica that received them — the leader — for the Jobs page.

Nothing durable: a new leader knows a job's progress from its driver's next heartbeat.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ProgressBoard:
    """Job id → the last progress its current driver run reported, with when."""

    def __init__(self) -> None:
        self._latest: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def note(self, job_id: str, run_id: str, progress: dict[str, Any]) -> None:
        entry = {**progress, "run_id": run_id, "reported_ms": int(time.time() * 1000)}
        with self._lock:
            self._latest[job_id] = entry

    def all(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {job: dict(entry) for job, entry in self._latest.items()}
