"""Connector benchmark (not a test): RabbitMQ → keyed state → PostgreSQL against the same
pipeline with the file source and the transactional file sink.

Same input and job for both: the orders example's messages (``--records`` of them,
``--keys`` keys), counted per key (``CountPerKey``), one output per message, parallelism
4, a checkpoint every ``--interval`` seconds (embedded coordinator, local disk), on one
``local[2]`` SparkSession. The queue side has every message published (persistent, with
confirms) before the clock starts; the file side has them written as newline-delimited
JSON files. The figure is records/s from the driver's start to the moment every record
is committed (rows in PostgreSQL / lines in committed files).

Run:  .venv/bin/python bench/connectors_bench.py [--records 40000] [--interval 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from sparkpoint.examples.orders import (
    CountPerKey,
    key_of,
    message,
    orders_pipeline,
    publish,
)
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from sparkpoint.pipeline import EmbeddedChannel, FileSource, Pipeline, PipelineDriver
from sparkpoint.pipeline.runtime.spark_session import spark_session
from sparkpoint.pipeline.sinks.files import TransactionalFileSink
from sparkpoint.pipeline.sources.rabbitmq import RabbitMQSource


def run_until(driver: PipelineDriver, done: Any, timeout: float = 3600) -> float:
    started = time.monotonic()
    driver.start()
    while not done():
        if time.monotonic() - started > timeout:
            raise TimeoutError("the run did not commit every record")
        if not driver.run_epoch():
            driver.poll()
            time.sleep(0.02)  # waiting for the coordinator's notice
    return time.monotonic() - started


def queue_side(spark: Any, work: Path, args: argparse.Namespace) -> float:
    rabbitmq = RabbitMQServer(work / "rabbitmq").start()
    pg_dir = Path(tempfile.mkdtemp(prefix="sparkpoint-bench-pg-"))
    postgres = PostgresServer(pg_dir).start()
    try:
        publish(rabbitmq.url, "bench", 0, args.records, args.keys)
        pipeline = orders_pipeline(
            "bench-queue",
            rabbitmq.url,
            "bench",
            postgres.conninfo,
            parallelism=4,
            prefetch=args.records,
            batch_size=args.batch,
        )
        channel = EmbeddedChannel(str(work / "ckpt-queue"), interval_ms=args.interval * 1000)
        driver = PipelineDriver(pipeline, spark, channel)

        def done() -> bool:
            with psycopg.connect(postgres.conninfo) as conn:
                row = conn.execute("SELECT count(*) FROM orders_seen").fetchone()
            return bool(row and row[0] >= args.records)

        elapsed = run_until(driver, done)
        driver.close()
        assert isinstance(pipeline.source_op, RabbitMQSource)
        pipeline.source_op.close()
        return args.records / elapsed
    finally:
        rabbitmq.close()
        postgres.close()
        shutil.rmtree(pg_dir, ignore_errors=True)


def file_side(spark: Any, work: Path, args: argparse.Namespace) -> float:
    inbox = work / "in"
    inbox.mkdir()
    per_file = max(1, args.batch)
    for start in range(0, args.records, per_file):
        lines = [
            message(i, args.keys)[1].decode()
            for i in range(start, min(start + per_file, args.records))
        ]
        (inbox / f"{start:010d}.jsonl").write_text("\n".join(lines) + "\n")
    sink = TransactionalFileSink(str(work / "out"), serialize=json.dumps)
    pipeline = (
        Pipeline("bench-files", parallelism=4)
        .source(FileSource(str(inbox), max_splits_per_epoch=1))
        .key_by(key_of)
        .process(CountPerKey())
        .sink(sink)
    )
    channel = EmbeddedChannel(str(work / "ckpt-files"), interval_ms=args.interval * 1000)
    driver = PipelineDriver(pipeline, spark, channel)
    committed = 0

    def done() -> bool:
        nonlocal committed
        committed = len(sink.committed_lines()) if sink.committed_files else 0
        return committed >= args.records

    elapsed = run_until(driver, done)
    driver.close()
    return args.records / elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=40_000)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--batch", type=int, default=5000, help="records per epoch")
    p.add_argument("--interval", type=int, default=10, help="checkpoint interval (s)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="connectors-bench-"))
    spark = spark_session("local[2]", "connectors-bench")
    try:
        files = file_side(spark, work, args)
        print(f"file source → file sink:       {files:,.0f} records/s (anchor)")
        queue = queue_side(spark, work, args)
        print(f"RabbitMQ → PostgreSQL:         {queue:,.0f} records/s ({queue / files:.2f}x)")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
