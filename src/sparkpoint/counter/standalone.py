"""In-process counter for the embedded (no ZooKeeper) mode and for tests."""

from __future__ import annotations

import threading

from sparkpoint.checkpoint import JobStatus, validate_checkpoint_id
from sparkpoint.counter.api import INITIAL_CHECKPOINT_ID


class StandaloneCheckpointIDCounter:
    """A thread-safe counter that lives as long as the process."""

    def __init__(self, initial: int = INITIAL_CHECKPOINT_ID) -> None:
        self._next = validate_checkpoint_id(initial)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Nothing to prepare in memory."""

    def shutdown(self, job_status: JobStatus) -> None:
        """Nothing to release: the value dies with the process whatever the status."""

    def get_and_increment(self) -> int:
        with self._lock:
            current = self._next
            self._next += 1
            return current

    def get(self) -> int:
        with self._lock:
            return self._next

    def set_count(self, new_count: int) -> None:
        validate_checkpoint_id(new_count)
        with self._lock:
            self._next = new_count
