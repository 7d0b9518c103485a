"""Heartbeats and acknowledgements on a thread, so the epoch loop never waits for the
coordinator — not even while the service elects a new leader.

Wraps any :class:`~sparkpoint.pipeline.channels.protocol.CheckpointChannel`. Start-up calls
(register, restore) and explicit triggers stay synchronous (a registration once the thread
runs — a live rescale — is made on the thread, between heartbeats); ``heartbeat`` returns the
notices the thread collected so far, and ``acknowledge``/``decline`` are queued (an
acknowledgement the coordinator refuses is logged and dropped: that checkpoint is gone).
A refusal of the run itself (:class:`~sparkpoint.pipeline.channels.protocol.RunSuperseded`) ends the
thread; the epoch loop's next ``heartbeat`` raises it, and notices not yet handed over are
dropped (a superseded run commits nothing more).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from sparkpoint.checkpoint import JobGraph
from sparkpoint.pipeline.channels.protocol import (
    Ack,
    CheckpointChannel,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
)

log = logging.getLogger(__name__)

#: How long a registration made on the running thread may take (a leader election
#: included) before the caller gives up.
_REGISTER_TIMEOUT_S = 120.0


class BackgroundChannel:
    def __init__(self, channel: CheckpointChannel, *, interval_s: float = 0.2) -> None:
        self.inner = channel
        self._interval = interval_s
        self._notices: queue.SimpleQueue[RunNotice] = queue.SimpleQueue()
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self.dropped: list[int] = []
        #: Set by the thread when the coordinator refused this run.
        self.superseded: RunSuperseded | None = None

    @property
    def progress(self) -> dict[str, Any] | None:
        """The wrapped channel's progress report (sent by the thread's heartbeats)."""
        return getattr(self.inner, "progress", None)

    @progress.setter
    def progress(self, report: dict[str, Any] | None) -> None:
        if hasattr(self.inner, "progress"):
            self.inner.progress = report  # type: ignore[attr-defined]

    def register(self, graph: JobGraph, *, standby: bool = False) -> str:
        if self._thread is None:
            return self.inner.register(graph, standby=standby)
        # Registering again while running (a live rescale's new graph): on the thread,
        # between two heartbeats — one in flight under the old run id would be refused
        # as a superseded run's — and the old run's notices not handed over are dropped.
        done: queue.SimpleQueue[tuple[str | None, BaseException | None]] = queue.SimpleQueue()

        def register() -> None:
            try:
                run_id = self.inner.register(graph, standby=standby)
            except BaseException as exc:  # handed to the caller, who raises it
                done.put((None, exc))
                return
            while not self._notices.empty():
                self._notices.get_nowait()
            done.put((run_id, None))

        self._check()
        self._work.put(register)
        try:
            run_id, error = done.get(timeout=_REGISTER_TIMEOUT_S)
        except queue.Empty:
            raise TimeoutError(
                f"job {graph.job_id}: no registration in {_REGISTER_TIMEOUT_S} s (the "
                "heartbeat thread is stuck on the coordinator, or ended)"
            ) from None
        if error is not None:
            raise error
        assert run_id is not None
        return run_id

    def wait_for_grant(self) -> list[RunNotice]:
        return self.inner.wait_for_grant()

    def release(self) -> None:
        self.inner.release()

    def restore(
        self, graph: JobGraph, pointer: str | None = None, mode: RestoreMode | None = None
    ) -> Restored | None:
        return self.inner.restore(graph, pointer, mode)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="sparkpoint-heartbeat", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                job = self._work.get(timeout=self._interval)
            except queue.Empty:
                job = None
            try:
                if job is not None:
                    job()
                if self._closed.is_set():
                    return
                for notice in self.inner.heartbeat():
                    self._notices.put(notice)
            except RunSuperseded as exc:
                self.superseded = exc
                return
            except Exception:
                # A refused request must not end the thread: the epoch loop would never
                # hear of a checkpoint again. Log it; the next round tries afresh.
                log.exception("coordinator request failed")

    def _check(self) -> None:
        if self.superseded is not None:
            raise self.superseded

    def heartbeat(self) -> list[RunNotice]:
        self._check()
        self._start()
        notices = []
        while True:
            try:
                notices.append(self._notices.get_nowait())
            except queue.Empty:
                return notices

    def acknowledge(self, checkpoint_id: int, acks: Sequence[Ack]) -> bool:
        self._check()

        def send() -> None:
            if not self.inner.acknowledge(checkpoint_id, acks):
                self.dropped.append(checkpoint_id)

        self._work.put(send)
        return True

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        self._check()
        self._work.put(lambda: self.inner.decline(checkpoint_id, operator_uid, subtask, reason))

    def rescaled(self, request_id: str, epoch: int, checkpoint_id: int | None) -> None:
        # On the thread: a report lost with a leader is repeated (the request stays
        # pending, and the next heartbeat carries it again).
        self._check()
        self._work.put(lambda: self.inner.rescaled(request_id, epoch, checkpoint_id))

    def trigger_checkpoint(self) -> int:
        return self.inner.trigger_checkpoint()

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        return self.inner.trigger_savepoint(target_dir, stop=stop)

    def close(self) -> None:
        self._closed.set()
        self._work.put(None)
        if self._thread is not None:
            self._thread.join(30)
        self.inner.close()
