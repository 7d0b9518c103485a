"""Exactly-once from RabbitMQ to PostgreSQL, in process on real Spark, under a declined
checkpoint, a broker restart and restores rescaled 4 → 2 → 7. (The driver killed with
SIGKILL: test_driver_kill.py; the database restarted during a commit:
test_postgres_sink.py.)"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkpoint.examples.orders import orders_pipeline
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from tests.examples import support
from tests.pipeline.support import block_state_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
MANUAL = 3_600_000


def test_a_declined_checkpoint_commits_and_acks_nothing_until_the_next(
    spark: SparkSession, rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 60)
    pipeline = orders_pipeline(
        job_id, rabbitmq.url, queue, postgres.conninfo, parallelism=2, batch_size=30
    )
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL, tolerable_failures=1)
    driver = PipelineDriver(pipeline, spark, channel, inline_threshold=0)
    driver.start()
    try:
        # The keyed operator's subtask 1 cannot write its state for checkpoint 1.
        block_state_files(spark, tmp_path / "ckpt" / job_id / "chk-1", "process", 1)
        assert channel.trigger_checkpoint() == 1
        support.run_until(driver, lambda: bool(driver.status.declined), "checkpoint 1 declined")
        support.run_until(driver, lambda: bool(driver.status.aborted), "checkpoint 1 aborted")
        assert support.row_count(postgres) == 0, "a declined checkpoint commits nothing"
        assert driver.pipeline.source_op.acknowledged == 0  # type: ignore[union-attr]
        support.run_until(driver, lambda: driver.status.records >= 60, "every message read")
        assert driver.finish() == 2
    finally:
        support.close(driver)
    support.verified(postgres, published)
    assert support.prepared_gids(postgres, job_id) == []


def test_broker_restart(
    spark: SparkSession, rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 80)
    driver = support.make_driver(
        spark, rabbitmq, postgres, job_id, queue, tmp_path / "ckpt", batch_size=20
    )
    try:
        support.run_until(
            driver, lambda: support.row_count(postgres) >= 20, "a first committed checkpoint"
        )
        rabbitmq.restart(signal.SIGKILL)  # a crash: unacked messages come back
        published += support.publish_range(rabbitmq, queue, 80, 20)
        support.run_until_rows(driver, postgres, 100)
        driver.finish()
    finally:
        support.close(driver)
    support.verified(postgres, published)


def test_restores_rescaled_4_2_7(
    spark: SparkSession, rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 90)
    ckpt = tmp_path / "ckpt"
    for parallelism, rows in ((4, 30), (2, 60)):
        driver = support.make_driver(
            spark, rabbitmq, postgres, job_id, queue, ckpt, parallelism=parallelism, batch_size=15
        )
        try:
            support.run_until_rows(driver, postgres, rows)
        finally:
            support.close(driver)  # no last checkpoint: the rest comes back from the broker
    driver = support.make_driver(
        spark, rabbitmq, postgres, job_id, queue, ckpt, parallelism=7, batch_size=15
    )
    try:
        assert driver.status.restored_from is not None
        support.run_until_rows(driver, postgres, 90)
        driver.finish()
    finally:
        support.close(driver)
    support.verified(postgres, published)
