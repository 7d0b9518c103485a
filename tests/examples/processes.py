"""The orders job as a real driver process (killed with real signals)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from tests.pipeline.processes import DriverProcess


def start_orders_driver(
    work: Path,
    rabbitmq: RabbitMQServer,
    postgres: PostgresServer,
    job_id: str,
    queue: str,
    *extra: str,
) -> DriverProcess:
    return _run_orders(
        work, "--job-id", job_id, "--amqp-url", rabbitmq.url, "--queue", queue,
        "--conninfo", postgres.conninfo, "--batch-size", "60", *extra,
    )  # fmt: skip


def start_kafka_orders_driver(
    work: Path, kafka: LocalKafka, job_id: str, source: str, out: str, *extra: str
) -> DriverProcess:
    """The Kafka variant of the orders job (``run_orders --bootstrap``)."""
    return _run_orders(
        work, "--job-id", job_id, "--bootstrap", kafka.bootstrap, "--input-topic", source,
        "--output-topic", out, "--batch-size", "30", *extra,
    )  # fmt: skip


def _run_orders(work: Path, *args: str) -> DriverProcess:
    work.mkdir(parents=True, exist_ok=True)
    n = len(list(work.glob("driver-*.log")))
    progress, log = work / f"progress-{n}.jsonl", work / f"driver-{n}.log"
    command = [
        sys.executable, "-m", "sparkpoint.examples.run_orders",
        "--checkpoint-dir", str(work / "ckpt"), "--parallelism", "2", "--interval-ms", "300",
        "--progress", str(progress), *args,
    ]  # fmt: skip
    with log.open("wb") as f:
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return DriverProcess(proc, progress, log)
