"""Savepoints and the transactional sinks on a real Kafka (and PostgreSQL), through the
embedded coordinator and through the service (real ZooKeeper and coordinator replicas).

An intermediate savepoint commits nothing: a driver that dies after it restores the
checkpoint before it, and what the savepoint would have committed is produced once, by
the replay. A driver that dies after its stop-with-savepoint committed restarts from that
savepoint. A job of another id started from a savepoint inherits the sink's identity, so
it does not produce the savepoint's batch again. The committed output is checked exactly
afterwards: every published id once, every key's count 1..n.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples import kafka_orders
from sparkpoint.examples.orders import orders_pipeline, verify
from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.channels.remote import RemoteChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from tests.examples import kafka_support as ks
from tests.examples.support import fresh_names, publish_range, reset_table, run_until
from tests.pipeline.conftest import cluster
from tests.service.support import ReplicaProcess

__all__ = ["cluster"]

pytestmark = [pytest.mark.slow]

#: A checkpoint interval no test waits out: checkpoints come when a test asks.
MANUAL = 3_600_000
BATCH = 40


def kafka_driver(
    spark: Any, kafka: LocalKafka, job: str, source: str, out: str, channel: Any, **kw: Any
) -> PipelineDriver:
    pipeline = kafka_orders.kafka_orders_pipeline(
        job, kafka.bootstrap, source, out, parallelism=2, max_records_per_partition=BATCH
    )
    driver = PipelineDriver(pipeline, spark, channel, **kw)
    driver.start()
    return driver


def embedded(work: Path) -> EmbeddedChannel:
    return EmbeddedChannel(str(work / "ckpt"), interval_ms=MANUAL)


def through_service(replicas: list[ReplicaProcess]) -> RemoteChannel:
    addresses = [f"127.0.0.1:{r.port}" for r in replicas]
    return RemoteChannel(addresses, checkpoint_config={"interval_ms": MANUAL})


def savepoint_without_stop(driver: PipelineDriver, target: Path) -> int:
    """Trigger a savepoint through the channel and run epochs until it completed."""
    cid = driver.channel.trigger_savepoint(str(target), stop=False)
    run_until(driver, lambda: cid in driver.status.completed, f"savepoint {cid} completed")
    return cid


def die(driver: PipelineDriver) -> None:
    """As kill -9 leaves it: nothing more of the driver runs, its run is not released
    (its clients are closed only because this process goes on)."""
    driver.channel.close()
    close_clients(driver)


def close_clients(driver: PipelineDriver) -> None:
    """The source's and the sink's clients (the driver's close does the sink's too)."""
    for end in (driver.pipeline.source_op, driver.pipeline.sink_op):
        if hasattr(end, "close"):
            end.close()


def records_at_least(driver: PipelineDriver, n: int) -> None:
    run_until(driver, lambda: driver.status.records >= n, f"{n} records through the job")


@pytest.mark.parametrize("coordinator", ["embedded", "service"])
def test_kafka_a_restart_after_a_savepoint_produces_each_record_once(
    spark: Any, kafka: LocalKafka, tmp_path: Path, coordinator: str, request: Any
) -> None:
    if coordinator == "embedded":

        def channel() -> Any:
            return embedded(tmp_path)
    else:
        replicas = request.getfixturevalue("cluster")

        def channel() -> Any:
            return through_service(replicas)

    job, source, out = ks.fresh_topics(kafka, partitions=2)
    published = ks.publish(kafka, source, 0, BATCH)
    first = kafka_driver(spark, kafka, job, source, out, channel())
    records_at_least(first, BATCH)
    checkpoint = first.finish()
    published += ks.publish(kafka, source, BATCH, BATCH)
    records_at_least(first, 2 * BATCH)
    savepoint = savepoint_without_stop(first, tmp_path / "sp")
    assert len(ks.settled_output(kafka, out)) == BATCH  # the savepoint committed nothing
    die(first)

    published += ks.publish(kafka, source, 2 * BATCH, BATCH)
    second = kafka_driver(spark, kafka, job, source, out, channel())
    assert second.status.restored_from == checkpoint
    records_at_least(second, 2 * BATCH)  # the replayed batch and the new one
    last = second.finish()
    ks.close(second)
    result = ks.verified(kafka, out, published)
    assert result.rows == 3 * BATCH
    assert last > savepoint


def test_kafka_a_driver_dead_after_its_stop_with_savepoint_restarts_from_it(
    spark: Any, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=2)
    published = ks.publish(kafka, source, 0, BATCH)
    first = kafka_driver(spark, kafka, job, source, out, embedded(tmp_path))
    records_at_least(first, BATCH)
    first.finish()
    published += ks.publish(kafka, source, BATCH, BATCH)
    records_at_least(first, 2 * BATCH)
    first.stop_with_savepoint(str(tmp_path / "sp"))
    assert len(ks.settled_output(kafka, out)) == 2 * BATCH  # a stop commits: the job ends there
    die(first)

    published += ks.publish(kafka, source, 2 * BATCH, BATCH)
    second = kafka_driver(spark, kafka, job, source, out, embedded(tmp_path))
    assert second.status.restored_from is not None
    records_at_least(second, BATCH)
    second.finish()
    ks.close(second)
    result = ks.verified(kafka, out, published)
    assert result.rows == 3 * BATCH


def test_kafka_a_job_of_another_id_started_from_a_stop_savepoint_produces_its_batch_once(
    spark: Any, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=2)
    published = ks.publish(kafka, source, 0, BATCH)
    first = kafka_driver(spark, kafka, job, source, out, embedded(tmp_path / "a"))
    records_at_least(first, BATCH)
    first.finish()
    published += ks.publish(kafka, source, BATCH, BATCH)
    records_at_least(first, 2 * BATCH)
    savepoint = first.stop_with_savepoint(str(tmp_path / "sp"))
    ks.close(first)
    assert len(ks.settled_output(kafka, out)) == 2 * BATCH

    published += ks.publish(kafka, source, 2 * BATCH, BATCH)
    other = f"{job}-b"
    second = kafka_driver(
        spark, kafka, other, source, out, embedded(tmp_path / "b"), restore_from=savepoint
    )
    assert second.status.restored_from is not None
    records_at_least(second, BATCH)
    second.finish()
    ks.close(second)
    result = ks.verified(kafka, out, published)
    assert result.rows == 3 * BATCH


def test_postgres_a_restart_after_a_savepoint_commits_each_row_once(
    spark: Any, rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    reset_table(postgres)
    job, queue = fresh_names()

    def driver() -> PipelineDriver:
        pipeline = orders_pipeline(
            job, rabbitmq.url, queue, postgres.conninfo, parallelism=2, batch_size=BATCH
        )
        d = PipelineDriver(pipeline, spark, embedded(tmp_path))
        d.start()
        return d

    published = publish_range(rabbitmq, queue, 0, BATCH)
    first = driver()
    records_at_least(first, BATCH)
    first.finish()
    published += publish_range(rabbitmq, queue, BATCH, BATCH)
    records_at_least(first, 2 * BATCH)
    savepoint_without_stop(first, tmp_path / "sp")
    die(first)

    published += publish_range(rabbitmq, queue, 2 * BATCH, BATCH)
    second = driver()
    records_at_least(second, 2 * BATCH)
    second.finish()
    second.close()
    close_clients(second)
    result = verify(postgres.conninfo, published)
    assert result.ok, result.summary()
    assert result.rows == 3 * BATCH
