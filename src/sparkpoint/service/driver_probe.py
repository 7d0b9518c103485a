"""Learning that a driver process died sooner than its heartbeats can say.

A driver run registers the address where its process listens (``host:port``; the socket
accepts and closes, nothing more). When a run that has a standby has been silent for
``probe_after_s``, the leader connects there. A refused connection means no process
listens on that port: the driver exited, was killed or crashed while its host stayed up,
and the standby is granted at once. Anything else proves nothing — accepted (alive but
slow, or frozen: the kernel accepts for a stopped process), or no answer (the host or the
network is gone) — and the driver takeover timeout decides, as without a probe.

Whether a refusal counts follows :mod:`sparkpoint.liveness`, the rule the coordinators
apply to each other: a driver that advertised a loopback address (it reached its first
coordinator through a port-forward or a tunnel) is probed only by a leader that is on
loopback itself; any other leader's own loopback would refuse on the driver's behalf.

A wrong "gone" (a refusal though the process lives, say a firewall answering with resets)
costs a needless takeover, never correctness: the old run is fenced by its run id and
commits nothing more (docs/pipeline.md, "Standby drivers").
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sparkpoint import metrics
from sparkpoint.liveness import Liveness, probe
from sparkpoint.runs.session import JobSession

log = logging.getLogger(__name__)


class DriverProber:
    """Probes silent driver runs off the worker thread (a probe may wait ``timeout_s``);
    one probe per job in flight, at most one per ``probe_after_s``."""

    def __init__(
        self,
        probe_after_s: float,
        *,
        own_address: str,
        timeout_s: float = 0.5,
        workers: int = 4,
    ) -> None:
        self._probe_after_s = probe_after_s
        self._own_address = own_address
        self._timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="driver-probe")
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._last: dict[str, float] = {}
        self._closed = False

    def consider(self, session: JobSession) -> None:
        """Probe ``session``'s current run if it has a standby, gave an address, and has
        been silent long enough; a refusal marks the run gone (the term then grants)."""
        # Called for every job on every tick: the record's fields first (no lock), the
        # coordinator's run id only for the few jobs that could be probed.
        record = session.record
        if self._probe_after_s <= 0 or self._closed:
            return
        if not (record.run_address and record.standby_run_id):
            return
        if session.silent_for() < self._probe_after_s:
            return
        # The run and its address from one version of the record: a registration switches
        # the coordinator's run before it writes the record, so the coordinator's run id
        # beside the record's address could pair a new run with the old run's address.
        run_id, address = record.run_id, record.run_address
        if not run_id:
            return
        now = time.monotonic()
        job = session.job_id
        with self._lock:
            if job in self._in_flight or now - self._last.get(job, -1e9) < self._probe_after_s:
                return
            self._in_flight.add(job)
            self._last[job] = now
        try:
            self._pool.submit(self._probe, session, run_id, address)
        except RuntimeError:  # shut down meanwhile: the term is closing
            with self._lock:
                self._in_flight.discard(job)

    def _probe(self, session: JobSession, run_id: str, address: str) -> None:
        try:
            verdict = probe(address, self._timeout_s, own_address=self._own_address, resolve=True)
            metrics.DRIVER_PROBES.labels(verdict=verdict.value).inc()
        finally:
            with self._lock:
                self._in_flight.discard(session.job_id)
        if verdict is Liveness.GONE and session.mark_gone(run_id):
            log.warning(
                "job %s: driver run %s is silent and nothing listens at %s: its process is gone",
                session.job_id,
                run_id,
                address,
            )

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
