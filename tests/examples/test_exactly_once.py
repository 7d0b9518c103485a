"""Exactly-once from RabbitMQ through keyed state into PostgreSQL, in process: real broker,
real database, real Spark (local mode)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from tests.examples import support

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_every_message_once_and_acked_after_completion(
    spark: SparkSession, rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 120)
    driver = support.make_driver(spark, rabbitmq, postgres, job_id, queue, tmp_path / "ckpt")
    try:
        support.run_until_rows(driver, postgres, 120)
        driver.finish()
    finally:
        support.close(driver)
    support.verified(postgres, published)
    assert support.prepared_gids(postgres, job_id) == []
