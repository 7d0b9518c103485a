"""Run the orders example as a process: ``python -m sparkpoint.examples.run_orders``.

RabbitMQ → count per key → PostgreSQL (or, with ``--bootstrap``, Kafka → count per key →
Kafka: ``kafka_orders.py``), until SIGTERM (after the running epoch) or Ctrl-C.
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

from sparkpoint.examples.orders import orders_pipeline
from sparkpoint.examples.run_clicks import (
    add_channel_arguments,
    check_channel_arguments,
    make_channel,
)
from sparkpoint.pipeline import (
    DriverStatus,
    KafkaSink,
    Pipeline,
    PipelineDriver,
    RabbitMQSource,
    RestoreMode,
    spark_session,
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job-id", default="orders")
    p.add_argument("--amqp-url")
    p.add_argument("--queue")
    p.add_argument("--conninfo", help="libpq connection string")
    p.add_argument("--bootstrap", help="Kafka bootstrap servers: the Kafka variant of the job")
    p.add_argument("--input-topic", default="orders")
    p.add_argument("--output-topic", default="orders-seen")
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--savepoint-dir")
    p.add_argument("--progress")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--parallelism", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=2000)
    p.add_argument("--prefetch", type=int, default=5000)
    p.add_argument("--interval-ms", type=int, default=1000)
    p.add_argument("--restore-from", help="a checkpoint or savepoint directory to start from")
    p.add_argument(
        "--restore-mode",
        choices=[m.value for m in RestoreMode],
        help="who owns the files of --restore-from (default no-claim: the first checkpoint "
        "is a full one of this job's own; claim: only this job's own checkpoints)",
    )
    add_channel_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    check_channel_arguments(parser(), args)
    progress = Path(args.progress) if args.progress else None
    pipeline = _pipeline(parser(), args)
    source, sink = pipeline.source_op, pipeline.sink_op

    def report(status: DriverStatus, **extra: Any) -> None:
        if progress is None:
            return
        line = {
            "epoch": status.epoch,
            "records": status.records,
            "restored_from": status.restored_from,
            "last_completed": status.last_completed,
            "declined": len(status.declined),
            **(
                {
                    "duplicates": source.duplicates,
                    "dead_lettered": source.dead_lettered,
                    "acknowledged": source.acknowledged,
                }
                if isinstance(source, RabbitMQSource)
                else {}
            ),
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
        restore_mode=args.restore_mode,
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
        for end in (source, sink):
            if hasattr(end, "close"):
                end.close()
        spark.stop()
    return 0


def _pipeline(p: argparse.ArgumentParser, args: argparse.Namespace) -> Pipeline:
    if args.bootstrap:
        from sparkpoint.examples.kafka_orders import kafka_orders_pipeline

        pipeline = kafka_orders_pipeline(
            args.job_id,
            args.bootstrap,
            args.input_topic,
            args.output_topic,
            parallelism=args.parallelism,
            max_records_per_partition=args.batch_size,
        )
        sink = pipeline.sink_op
        assert isinstance(sink, KafkaSink)
        from sparkpoint.pipeline import CheckpointingOptions

        timeout_ms = CheckpointingOptions().timeout_ms  # the job sets only the interval
        sink.require_timeout_covers(args.interval_ms / 1000, timeout_ms / 1000)
        return pipeline
    if not (args.amqp_url and args.queue and args.conninfo):
        p.error("give --amqp-url, --queue and --conninfo (or --bootstrap for Kafka)")
    return orders_pipeline(
        args.job_id,
        args.amqp_url,
        args.queue,
        args.conninfo,
        parallelism=args.parallelism,
        prefetch=args.prefetch,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    sys.exit(main())
