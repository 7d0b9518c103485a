"""Run the orders example as a process: ``python -m sparkpoint.pipeline.examples.run_orders``.

RabbitMQ → count per key → PostgreSQL, until SIGTERM (after the running epoch) or Ctrl-C.
Used by the process-level connector tests (kill the driver), the demo and the benchmark.
Restores from the newest complete checkpoint under ``--checkpoint-dir`` (or through
``--coordinator``) and writes one JSON line of progress per epoch to ``--progress``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from sparkpoint.pipeline.driver import DriverStatus, PipelineDriver
from sparkpoint.pipeline.examples.orders import orders_pipeline
from sparkpoint.pipeline.examples.run_clicks import (
    add_channel_arguments,
    check_channel_arguments,
    make_channel,
)
from sparkpoint.pipeline.session import spark_session
from sparkpoint.pipeline.sources.rabbitmq import RabbitMQSource


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job-id", default="orders")
    p.add_argument("--amqp-url", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--conninfo", required=True, help="libpq connection string")
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--savepoint-dir")
    p.add_argument("--progress")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--parallelism", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=2000)
    p.add_argument("--prefetch", type=int, default=5000)
    p.add_argument("--interval-ms", type=int, default=1000)
    p.add_argument("--restore-from")
    add_channel_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    check_channel_arguments(parser(), args)
    progress = Path(args.progress) if args.progress else None
    pipeline = orders_pipeline(
        args.job_id,
        args.amqp_url,
        args.queue,
        args.conninfo,
        parallelism=args.parallelism,
        prefetch=args.prefetch,
        batch_size=args.batch_size,
    )
    source = pipeline.source_op
    assert isinstance(source, RabbitMQSource)

    def report(status: DriverStatus, **extra: Any) -> None:
        if progress is None:
            return
        line = {
            "epoch": status.epoch,
            "records": status.records,
            "restored_from": status.restored_from,
            "last_completed": status.last_completed,
            "declined": len(status.declined),
            "duplicates": source.duplicates,
            "dead_lettered": source.dead_lettered,
            "acknowledged": source.acknowledged,
            "time": time.time(),
            "pid": os.getpid(),
            **extra,
        }
        with progress.open("a") as f:
            f.write(json.dumps(line) + "\n")

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()  # the loop ends after the epoch that runs now

    signal.signal(signal.SIGTERM, request_stop)
    spark = spark_session(args.master, f"sparkpoint-{args.job_id}")
    driver = PipelineDriver(
        pipeline,
        spark,
        make_channel(args),
        restore_from=args.restore_from,
        on_epoch=report,
        standby=args.standby,
    )
    if args.standby:
        report(driver.status, event="standby")
    try:
        driver.start()
        report(driver.status, event="started")
        driver.run(until=lambda _: stop.is_set())
        report(driver.status, event="stopped")
    except KeyboardInterrupt:
        # Stop where we are: what completed checkpoints hold is committed and acked; the
        # rest is redelivered by the broker and replayed by the next start.
        report(driver.status, event="interrupted")
    finally:
        driver.close()
        source.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
