"""In-process completed-checkpoint store for the embedded mode and for tests."""

from __future__ import annotations

import threading

from sparkpoint.checkpoint import CheckpointPointer, JobStatus
from sparkpoint.store.api import DEFAULT_MAX_RETAINED, CheckpointDiscarder
from sparkpoint.store.retention import check_can_add, subsumed_by_adding, validate_max_retained


class StandaloneCompletedCheckpointStore:
    """Keeps the retained pointers in memory; nothing survives the process."""

    def __init__(self, max_retained: int = DEFAULT_MAX_RETAINED) -> None:
        self._max_retained = validate_max_retained(max_retained)
        self._retained: list[CheckpointPointer] = []
        self._lock = threading.Lock()

    @property
    def max_retained(self) -> int:
        return self._max_retained

    def recover(self) -> list[CheckpointPointer]:
        return self.get_all()

    def add_checkpoint_and_subsume_oldest(
        self, pointer: CheckpointPointer, discarder: CheckpointDiscarder | None = None
    ) -> list[CheckpointPointer]:
        with self._lock:
            check_can_add(self._retained, pointer)
            subsumed = subsumed_by_adding(self._retained, self._max_retained)
            self._retained = [*self._retained[len(subsumed) :], pointer]
        _discard_all(subsumed, discarder)
        return subsumed

    def get_latest(self) -> CheckpointPointer | None:
        with self._lock:
            return self._retained[-1] if self._retained else None

    def get_all(self) -> list[CheckpointPointer]:
        with self._lock:
            return list(self._retained)

    def shutdown(self, job_status: JobStatus, discarder: CheckpointDiscarder | None = None) -> None:
        with self._lock:
            dropped, self._retained = self._retained, []
        if job_status.is_globally_terminal:
            _discard_all(dropped, discarder)


def _discard_all(pointers: list[CheckpointPointer], discarder: CheckpointDiscarder | None) -> None:
    if discarder is None:
        return
    for pointer in pointers:
        if not pointer.is_savepoint:
            discarder.discard(pointer)
