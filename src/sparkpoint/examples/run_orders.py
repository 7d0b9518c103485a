"""Run the orders example as a process: ``python -m sparkpoint.examples.run_orders``.

RabbitMQ → count per key → PostgreSQL (or, with ``--bootstrap``, Kafka → count per key →
Kafka: ``kafka_orders.py``), until SIGTERM or Ctrl-C (after the running epoch; a second
Ctrl-C at once).
Used by the process-level connector tests (kill the driver), the demo and the benchmark.
Restores from the newest complete checkpoint under ``--checkpoint-dir`` (or through
``--coordinator``) and writes one JSON line of progress per epoch to ``--progress``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sparkpoint.examples.driver_process import (
    add_driver_arguments,
    check_channel_arguments,
    make_driver,
    progress_reporter,
    stop_after_this_epoch_on_signal,
)
from sparkpoint.examples.orders import orders_pipeline
from sparkpoint.pipeline import DriverStatus, KafkaSink, Pipeline, RabbitMQSource, spark_session


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job-id", default="orders")
    p.add_argument("--amqp-url")
    p.add_argument("--queue")
    p.add_argument("--conninfo", help="libpq connection string")
    p.add_argument("--bootstrap", help="Kafka bootstrap servers: the Kafka variant of the job")
    p.add_argument("--input-topic", default="orders")
    p.add_argument("--output-topic", default="orders-seen")
    p.add_argument("--batch-size", type=int, default=2000)
    p.add_argument("--prefetch", type=int, default=5000)
    add_driver_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    check_channel_arguments(parser(), args)
    pipeline = _pipeline(parser(), args)
    source, sink = pipeline.source_op, pipeline.sink_op

    def details(status: DriverStatus) -> dict[str, Any]:
        """What the orders job's progress lines add: declines and the broker's counts."""
        counts = (
            {
                "duplicates": source.duplicates,
                "dead_lettered": source.dead_lettered,
                "acknowledged": source.acknowledged,
            }
            if isinstance(source, RabbitMQSource)
            else {}
        )
        return {"declined": len(status.declined), **counts}

    report = progress_reporter(args.progress, details)

    stop = stop_after_this_epoch_on_signal()
    spark = spark_session(args.master, f"sparkpoint-{args.job_id}")
    driver = make_driver(pipeline, spark, args, report)
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
