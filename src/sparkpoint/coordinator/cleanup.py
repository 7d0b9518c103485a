"""Deleting files in the background: subsumed checkpoints and aborted checkpoint directories.

Deletion is the last step of docs/architecture.md §4 and may be slow (HDFS), so it never holds
up acknowledgements or the next trigger. A crash before it runs leaves orphans, which the
garbage collector removes; a failed deletion is logged for the same reason, not retried.

A deletion belongs to the leadership term that decided it: it was decided on that term's
view of the store and the counter. :meth:`CleanupWorker.bound` gives a term a view of the
worker whose tasks run only while the term may still act, so a replica that lost
leadership drops what it had queued instead of deleting on a view that is no longer the
cluster's (what it leaves, the next leader's orphan collector judges afresh).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

from sparkpoint import metrics
from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.coordinator.storage_api import STORAGE_FAILURES
from sparkpoint.store import CheckpointDiscarder

log = logging.getLogger(__name__)

_STOP = object()


class Cleanup(Protocol):
    """What the coordinator and a job's end need of a cleanup worker."""

    def submit(self, description: str, task: Callable[[], None]) -> None: ...

    def discard_checkpoint(
        self, discarder: CheckpointDiscarder, pointer: CheckpointPointer
    ) -> None: ...


class CleanupWorker:
    """One daemon thread running deletion tasks in submission order.

    The thread starts with the first task, so a coordinator that never deletes anything
    never owns a thread.
    """

    def __init__(self, name: str = "sparkpoint-cleanup", *, delay_s: float = 0.0) -> None:
        self._name = name
        #: Each task waits this long first (``state.checkpoints.cleanup.delay``: a slow
        #: storage, for drills).
        self._delay_s = delay_s
        self._closing = threading.Event()
        self._tasks: queue.Queue[object] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._outstanding = 0
        self._closed = False
        self.failures = 0
        #: Tasks dropped because the term that queued them had ended.
        self.dropped = 0

    def bound(self, guard: Callable[[], bool]) -> BoundCleanup:
        """A view whose tasks run only while ``guard()`` holds when their turn comes."""
        return BoundCleanup(self, guard)

    def submit(
        self, description: str, task: Callable[[], None], guard: Callable[[], bool] | None = None
    ) -> None:
        with self._lock:
            if self._closed:
                log.warning("cleanup worker closed, not running: %s", description)
                return
            self._outstanding += 1
            metrics.CLEANUP_QUEUED.set(self._outstanding)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._tasks.put((description, task, guard))

    def discard_checkpoint(
        self, discarder: CheckpointDiscarder, pointer: CheckpointPointer
    ) -> None:
        """Delete a subsumed checkpoint's files; savepoints belong to the user and are kept."""
        _discard(self, discarder, pointer)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every submitted task ran; False if ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._outstanding:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
            return True

    def close(self, timeout: float = 10.0) -> bool:
        """Run what was submitted, then stop the thread; False if it did not finish in time."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._closing.set()
        if thread is None:
            return True
        self._tasks.put(_STOP)
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        while True:
            item = self._tasks.get()
            if item is _STOP:
                return
            description, task, guard = item  # type: ignore[misc]
            if self._delay_s:
                self._closing.wait(self._delay_s)
            try:
                if guard is not None and not guard():
                    self.dropped += 1
                    log.info("not run, the term that queued it has ended: %s", description)
                    continue
                task()
            except STORAGE_FAILURES as exc:
                self.failures += 1
                log.warning(
                    "%s failed, leaving an orphan for the garbage collector: %s", description, exc
                )
            except Exception:
                # A bug in a discarder must not kill the thread that serves every later
                # deletion; it is logged with its traceback and counted.
                self.failures += 1
                log.exception("%s failed unexpectedly", description)
            finally:
                with self._idle:
                    self._outstanding -= 1
                    metrics.CLEANUP_QUEUED.set(self._outstanding)
                    self._idle.notify_all()


class BoundCleanup:
    """A term's view of the replica's cleanup worker (see the module docstring)."""

    def __init__(self, worker: CleanupWorker, guard: Callable[[], bool]) -> None:
        self.worker = worker
        self._guard = guard

    def submit(self, description: str, task: Callable[[], None]) -> None:
        self.worker.submit(description, task, self._guard)

    def discard_checkpoint(
        self, discarder: CheckpointDiscarder, pointer: CheckpointPointer
    ) -> None:
        _discard(self, discarder, pointer)


def _discard(cleanup: Cleanup, discarder: CheckpointDiscarder, pointer: CheckpointPointer) -> None:
    if pointer.is_savepoint:
        return
    cleanup.submit(
        f"discard checkpoint {pointer.checkpoint_id} of job {pointer.job_id}",
        lambda: discarder.discard(pointer),
    )
