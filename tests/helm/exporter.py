"""A process serving sparkpoint's real ``/metrics``: prometheus-client's default registry
with ``sparkpoint.metrics`` imported, over prometheus-client's own HTTP server.

``--samples`` records a sample of every metric first (what a busy coordinator would show).
A separate process, so that the test process' own metrics stay untouched.

    python -m tests.helm.exporter --port-file PORT --samples
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from prometheus_client import start_http_server

from sparkpoint import metrics


def record_samples() -> None:
    metrics.IS_LEADER.set(1)
    metrics.LEADER_EPOCH.set(7)
    metrics.LEADER_CHANGES.inc()
    metrics.FENCED_WRITES.inc(0)
    metrics.ZOOKEEPER_CONNECTION_STATE.state("connected")
    metrics.STORE_RECOVERY_DURATION.observe(0.02)
    for job in ("wordcount", "sessions"):
        metrics.STORE_UNREADABLE_POINTERS.labels(job_id=job).inc(0)
        metrics.CHECKPOINTS_TRIGGERED.labels(job_id=job).inc(12)
        metrics.CHECKPOINTS_COMPLETED.labels(job_id=job).inc(10)
        metrics.CHECKPOINTS_FAILED.labels(job_id=job).inc(2)
        metrics.CHECKPOINTS_EXPIRED.labels(job_id=job).inc(1)
        metrics.PENDING_CHECKPOINTS.labels(job_id=job).set(1)
        metrics.CHECKPOINT_DURATION.labels(job_id=job).observe(1.5)
        metrics.CHECKPOINT_FINALIZE_DURATION.labels(job_id=job).observe(0.03)
        metrics.LAST_CHECKPOINT_TIMESTAMP.labels(job_id=job).set(1_700_000_000.5)
        metrics.LAST_CHECKPOINT_SIZE.labels(job_id=job).set(4096)
        metrics.LAST_CHECKPOINT_CHECKPOINTED_SIZE.labels(job_id=job).set(512)
        metrics.LAST_CHECKPOINT_ID.labels(job_id=job).set(10)
        metrics.CHECKPOINT_INTERVAL.labels(job_id=job).set(10)
        metrics.RESTORES.labels(job_id=job).inc(1)
        metrics.RESTORE_FALLBACKS.labels(job_id=job).inc(0)
        metrics.ORPHAN_DIRECTORIES.labels(job_id=job).set(1)
        metrics.ORPHAN_BYTES.labels(job_id=job).set(2048)
        metrics.ORPHAN_DIRECTORIES_REMOVED.labels(job_id=job).inc(3)
        metrics.ORPHAN_BYTES_REMOVED.labels(job_id=job).inc(6144)
        metrics.ORPHAN_SCAN_FAILURES.labels(job_id=job).inc(0)
        metrics.ORPHAN_UNDECODABLE_POINTERS.labels(job_id=job).set(0)
    metrics.ORPHAN_SCANS.inc(5)
    metrics.DRIVER_PROBES.labels(verdict="alive").inc(2)
    metrics.CLEANUP_QUEUED.set(1)
    metrics.SOURCE_DEAD_LETTERED.labels(source="orders", reason="undecodable").inc(1)
    # A job that ended: its series are gone from the page.
    metrics.CHECKPOINTS_TRIGGERED.labels(job_id="ended").inc()
    metrics.remove_job("ended")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helm.exporter")
    parser.add_argument("--port-file", required=True, help="where to write the port")
    parser.add_argument("--samples", action="store_true", help="record a sample of each")
    args = parser.parse_args()
    if args.samples:
        record_samples()
    server, _ = start_http_server(0, addr="127.0.0.1")
    port_file = Path(args.port_file)
    port_file.with_suffix(".tmp").write_text(str(server.server_address[1]))
    port_file.with_suffix(".tmp").replace(port_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
