"""The Kafka source and the exactly-once Kafka sink on a real broker, in-process: a rescale
4 → 2 → 6 of a 6-partition topic, a partition added while running, output visible only
once its checkpoint completed, poison records dead-lettered, the timeout check."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.pipeline.sinks.kafka import KafkaSink, KafkaSinkError
from sparkpoint.pipeline.sources.kafka import ORIGIN_HEADER, KafkaSource
from tests.examples import kafka_support as ks
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def source_offsets(driver: object) -> dict[str, int]:
    source = driver.pipeline.source_op  # type: ignore[attr-defined]
    assert isinstance(source, KafkaSource)
    return source.offsets()


def test_rescale_4_2_6_reads_every_record_once(
    spark: SparkSession, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=6)
    published = ks.publish(kafka, source, 0, 600)
    savepoint: str | None = None
    for step, parallelism in enumerate((4, 2, 6)):
        driver = ks.make_driver(
            spark, kafka, job, source, out, tmp_path / "ckpt",
            parallelism=parallelism, per_partition=15, restore_from=savepoint,
        )  # fmt: skip
        try:
            if step:
                # Every partition's offset came back, whichever subtask held it.
                assert len(source_offsets(driver)) == 6
            if step < 2:
                read = sum(source_offsets(driver).values())
                ks.run_until(
                    driver,
                    lambda d=driver, r=read: sum(source_offsets(d).values()) >= r + 150,
                    "150 more records read",
                )
                published += ks.publish(kafka, source, 600 + 100 * step, 100)
                savepoint = driver.stop_with_savepoint(str(tmp_path / "savepoints"))
            else:
                ks.run_until_output(driver, kafka, out, len(published))
                driver.finish()
        finally:
            ks.close(driver)
    ks.verified(kafka, out, published)


def test_partition_added_while_running(
    spark: SparkSession, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=2)
    published = ks.publish(kafka, source, 0, 100)
    driver = ks.make_driver(
        spark, kafka, job, source, out, tmp_path / "ckpt", discovery_interval_s=0.2
    )
    try:
        ks.run_until_output(driver, kafka, out, 50)
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_partitions([NewPartitions(source, 4)])[source].result(60)
        ks.run_until(driver, lambda: len(source_offsets(driver)) == 4, "4 partitions known")
        published += ks.publish(kafka, source, 100, 200)
        ks.run_until_output(driver, kafka, out, len(published))
        driver.finish()
    finally:
        ks.close(driver)
    assert all(o > 0 for o in source_offsets(driver).values())  # new partitions were read
    ks.verified(kafka, out, published)


def test_output_visible_only_after_its_checkpoint_completed(
    spark: SparkSession, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=3)
    published = ks.publish(kafka, source, 0, 120)
    # No periodic checkpoints: only finish() takes one.
    driver = ks.make_driver(
        spark, kafka, job, source, out, tmp_path / "ckpt", interval_ms=3_600_000
    )
    try:
        ks.run_until(driver, lambda: driver.status.records >= 120, "every record processed")
        assert ks.output(kafka, out) == []
        driver.finish()
        assert len(ks.output(kafka, out)) == 120
    finally:
        ks.close(driver)
    ks.verified(kafka, out, published)


def test_poison_record_dead_lettered_and_offsets_committed_for_lag_tools(
    spark: SparkSession, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=1)
    ks.kafka_orders.create_topics(kafka.bootstrap, {f"{source}.dlq": 1})
    published = ks.publish(kafka, source, 0, 10)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(source, b"\xff{not json")
    assert producer.flush(30) == 0
    published += ks.publish(kafka, source, 10, 10)
    driver = ks.make_driver(spark, kafka, job, source, out, tmp_path / "ckpt")
    try:
        ks.run_until_output(driver, kafka, out, 20)
        driver.finish()
    finally:
        ks.close(driver)
    ks.verified(kafka, out, published)
    dead = _records(kafka, f"{source}.dlq")
    assert [(v, dict(h)[ORIGIN_HEADER]) for v, h in dead] == [
        (b"\xff{not json", f"{source}:0:10".encode())
    ]
    group = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"sparkpoint-{source}"})
    try:
        wait_until(
            lambda: group.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 21,
            timeout=60,
            message="the completed checkpoint's offset committed to the group",
        )
    finally:
        group.close()


def test_transaction_timeout_must_cover_the_checkpoint_interval(kafka: LocalKafka) -> None:
    sink = KafkaSink(kafka.bootstrap, "any", transaction_timeout_ms=10_000)
    with pytest.raises(KafkaSinkError, match="transaction_timeout_ms=10000 is below"):
        sink.require_timeout_covers(interval_s=10, timeout_s=60)
    sink.require_timeout_covers(interval_s=1, timeout_s=5)
    too_long = KafkaSink(kafka.bootstrap, "any", transaction_timeout_ms=3_600_000)
    too_long.bind("job", "sink")
    with pytest.raises(KafkaSinkError, match=r"transaction\.max\.timeout\.ms"):
        too_long.restore([])


def test_at_least_once_mode_loses_nothing(
    spark: SparkSession, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=2)
    published = ks.publish(kafka, source, 0, 80)
    driver = ks.make_driver(spark, kafka, job, source, out, tmp_path / "ckpt", exactly_once=False)
    try:
        ks.run_until_output(driver, kafka, out, 80)
        driver.finish()
    finally:
        ks.close(driver)
    assert sorted(r[0] for r in ks.output(kafka, out)) == sorted(published)


def _records(kafka: LocalKafka, topic: str) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "dlq-check"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[bytes, list[tuple[str, bytes]]]] = []
        wait_until(
            lambda: (
                [
                    got.append((m.value(), m.headers() or []))
                    for m in consumer.consume(100, timeout=0.5)
                    if m.error() is None
                ]
                or got
            ),
            timeout=60,
            message=f"a record in {topic}",
        )
        return got
    finally:
        consumer.close()


def _read_all(source: KafkaSource) -> list[str]:
    """Every record of the next epoch, read as the executors would (ids)."""
    ranges = source.plan_epoch()
    source.advance(ranges)
    reader = source.reader()
    return sorted(r["id"] for split in ranges for _, r in reader.read(split))


def test_pattern_discovery_and_start_positions(kafka: LocalKafka) -> None:
    _, first, _ = ks.fresh_topics(kafka, partitions=2)
    stem = first.removeprefix("in-")
    published = ks.publish(kafka, first, 0, 20)
    pattern = KafkaSource(kafka.bootstrap, pattern=f"in-{stem}.*", discovery_interval_s=0)
    latest = KafkaSource(kafka.bootstrap, topics=(first,), start="latest", name="latest")
    assert _read_all(pattern) == sorted(published)
    assert _read_all(latest) == []
    ks.kafka_orders.create_topics(kafka.bootstrap, {f"in-{stem}-more": 1})
    since_ms = int(time.time() * 1000)
    later = ks.publish(kafka, f"in-{stem}-more", 20, 5) + ks.publish(kafka, first, 25, 5)
    assert _read_all(pattern) == sorted(later)  # the new topic, read from its start
    assert _read_all(latest) == sorted(later[5:])
    timed = KafkaSource(kafka.bootstrap, pattern=f"in-{stem}.*", start=since_ms, name="timed")
    assert _read_all(timed) == sorted(later)
    # The group's offsets, committed when a checkpoint completed, start a fresh job there.
    pattern.snapshot_state(1)
    pattern.notify_checkpoint_complete(1)
    group = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": pattern.group_id})
    wait_until(
        lambda: group.committed([TopicPartition(first, 0)], timeout=10)[0].offset > 0,
        timeout=60,
        message="the group's offsets committed",
    )
    group.close()
    resumed = KafkaSource(kafka.bootstrap, pattern=f"in-{stem}.*", start="group",
                          group_id=pattern.group_id)  # fmt: skip
    assert resumed.plan_epoch() == []
    for source in (pattern, latest, timed, resumed):
        source.close()
