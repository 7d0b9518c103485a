"""Retained checkpoints for a UI that polls: on a follower, 1,000 pointers read one by one
from ZooKeeper take seconds, so each replica keeps what it read and asks ZooKeeper only
for the list of ids and the pointers it has not seen."""

from __future__ import annotations

import threading

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.service.backend import Backend, ZooKeeperBackend
from sparkpoint.store import ZooKeeperCompletedCheckpointStore


class RetainedCache:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._known: dict[str, dict[int, CheckpointPointer]] = {}

    def retained(self, job_id: str) -> list[CheckpointPointer]:
        """What ZooKeeper retains now for ``job_id``, oldest first."""
        backend = self._backend
        if not isinstance(backend, ZooKeeperBackend):
            return backend.retained(job_id)
        with self._lock:
            known = dict(self._known.get(job_id, {}))
        store = ZooKeeperCompletedCheckpointStore(backend.conn, job_id, None)
        pointers = store.read_incrementally(known)
        with self._lock:
            self._known[job_id] = {p.checkpoint_id: p for p in pointers}
        return pointers
