"""Shared pieces of the connector tests: queues, published ids, rows, in-process runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from sparkpoint.examples.orders import (
    TABLE,
    Verification,
    message,
    orders_pipeline,
    publish,
    verify,
)
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from sparkpoint.pipeline.sources.rabbitmq import RabbitMQSource
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEYS = 7


def fresh_names() -> tuple[str, str]:
    """A job id and a queue nobody else uses."""
    suffix = uuid.uuid4().hex[:8]
    return f"orders-{suffix}", f"orders-{suffix}"


def ids(first: int, count: int) -> list[str]:
    return [message(i, KEYS)[0] for i in range(first, first + count)]


def publish_range(rabbitmq: RabbitMQServer, queue: str, first: int, count: int) -> list[str]:
    publish(rabbitmq.url, queue, first, count, KEYS)
    return ids(first, count)


def reset_table(postgres: PostgresServer) -> None:
    with psycopg.connect(postgres.conninfo, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


def row_count(postgres: PostgresServer) -> int:
    with psycopg.connect(postgres.conninfo) as conn:
        row = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    return int(row[0]) if row else 0


def prepared_gids(postgres: PostgresServer, job_id: str) -> list[str]:
    with psycopg.connect(postgres.conninfo) as conn:
        rows = conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s", (f"sp:{job_id}:%",)
        ).fetchall()
    return [r[0] for r in rows]


def make_driver(
    spark: SparkSession,
    rabbitmq: RabbitMQServer,
    postgres: PostgresServer,
    job_id: str,
    queue: str,
    ckpt: Path,
    *,
    parallelism: int = 2,
    batch_size: int = 50,
    interval_ms: int = 200,
) -> PipelineDriver:
    pipeline = orders_pipeline(
        job_id,
        rabbitmq.url,
        queue,
        postgres.conninfo,
        parallelism=parallelism,
        batch_size=batch_size,
    )
    channel = EmbeddedChannel(str(ckpt), interval_ms=interval_ms)
    driver = PipelineDriver(pipeline, spark, channel)
    driver.start()
    return driver


def close(driver: PipelineDriver) -> None:
    driver.close()
    source = driver.pipeline.source_op
    if isinstance(source, RabbitMQSource):
        source.close()


def run_until(
    driver: PipelineDriver, condition: Callable[[], bool], message: str, timeout: float = 240
) -> None:
    """Run epochs (or heartbeat when there is nothing to run) until ``condition()``."""

    def step() -> bool:
        if not driver.run_epoch():
            driver.poll()
        return condition()

    wait_until(step, timeout=timeout, message=message, interval=0.05)


def run_until_rows(
    driver: PipelineDriver,
    postgres: PostgresServer,
    rows: int,
    *,
    timeout: float = 180,
    during: Callable[[PipelineDriver], None] | None = None,
) -> None:
    """Run epochs until ``rows`` rows are committed."""

    def step() -> bool:
        if during is not None:
            during(driver)
        if not driver.run_epoch():
            driver.poll()
        return row_count(postgres) >= rows

    wait_until(step, timeout=timeout, message=f"{rows} rows committed", interval=0.05)


def verified(postgres: PostgresServer, published: list[str]) -> Verification:
    result = verify(postgres.conninfo, published)
    assert result.ok, result.summary()
    return result
