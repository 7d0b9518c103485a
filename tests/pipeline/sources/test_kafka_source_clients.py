"""The Kafka source on a broker that creates no topic by itself
(``auto.create.topics.enable=false``): poison records reach the dead-letter topic the
source created, an epoch whose poison records were not delivered fails and its offsets
stay; no client of the source (driver or executors) outlives the job; a topic given as
one string is one topic."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from sparkpoint.examples.orders import CountPerKey, key_of
from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from sparkpoint.pipeline.sinks.files import TransactionalFileSink
from sparkpoint.pipeline.sources.kafka import ORIGIN_HEADER, KafkaSource
from tests.examples import kafka_support as ks
from tests.support.leftover_clients import StoppedServer, connected_to
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

POISON = b"\xff{not json"


@pytest.fixture(scope="module")
def strict_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    cluster = LocalKafka(
        tmp_path_factory.mktemp("kafka"), settings={"auto.create.topics.enable": "false"}
    ).start()
    yield cluster
    cluster.stop()


def make_driver(
    spark: SparkSession, kafka: LocalKafka, job: str, topic: str, work: Path, **options: Any
) -> PipelineDriver:
    """Kafka source → the orders' count per key → committed files (no Kafka client but
    the source's)."""
    source = KafkaSource(
        kafka.bootstrap, topics=topic, name=topic, max_records_per_partition=10, **options
    )
    pipeline = (
        Pipeline(job, parallelism=2)
        .source(source)
        .key_by(key_of)
        .process(CountPerKey())
        .sink(TransactionalFileSink(str(work / "out")))
    )
    driver = PipelineDriver(pipeline, spark, EmbeddedChannel(str(work / "ckpt"), interval_ms=200))
    driver.start()
    return driver


def committed_ids(work: Path) -> list[str]:
    sink = TransactionalFileSink(str(work / "out"))
    return sorted(json.loads(line)[0] for line in sink.committed_lines())


def publish_with_poison(kafka: LocalKafka, topic: str, first: int) -> list[str]:
    """10 records, a poison one, 10 more (one partition: the poison one at ``first+10``)."""
    published = ks.publish(kafka, topic, first, 10)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(topic, POISON)
    assert producer.flush(30) == 0
    return published + ks.publish(kafka, topic, first + 10, 10)


def run_to(driver: PipelineDriver, work: Path, published: list[str]) -> None:
    ks.run_until(driver, lambda: committed_ids(work) == sorted(published), "every record committed")
    driver.finish()


def dead_letters(kafka: LocalKafka, topic: str) -> list[tuple[bytes, dict[str, bytes]]]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "dlq-check"})
    got: list[tuple[bytes, dict[str, bytes]]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        wait_until(
            lambda: (
                got.extend(
                    (m.value(), dict(m.headers() or []))
                    for m in consumer.consume(100, timeout=0.5)
                    if m.error() is None
                )
                or got
            ),
            timeout=60,
            message=f"a record in {topic}",
        )
    finally:
        consumer.close()
    return got


def test_poison_records_reach_the_dead_letter_topic_the_source_created(
    spark: SparkSession, strict_kafka: LocalKafka, tmp_path: Path
) -> None:
    job, topic, _ = ks.fresh_topics(strict_kafka, partitions=1)
    published = publish_with_poison(strict_kafka, topic, 0)
    driver = make_driver(spark, strict_kafka, job, topic, tmp_path)
    try:
        run_to(driver, tmp_path, published)
    finally:
        driver.close()
    assert [(v, h[ORIGIN_HEADER]) for v, h in dead_letters(strict_kafka, f"{topic}.dlq")] == [
        (POISON, f"{topic}:0:10".encode())
    ]


def test_undelivered_dead_letters_fail_the_epoch_and_its_offsets_stay(
    spark: SparkSession, strict_kafka: LocalKafka, tmp_path: Path
) -> None:
    job, topic, _ = ks.fresh_topics(strict_kafka, partitions=1)
    published = ks.publish(strict_kafka, topic, 0, 20)
    driver = make_driver(spark, strict_kafka, job, topic, tmp_path, dead_letter_timeout_s=3)
    try:
        ks.run_until(driver, lambda: committed_ids(tmp_path) == sorted(published), "20 committed")
        # The dead-letter topic disappears while the job runs; the broker won't create it.
        admin = AdminClient({"bootstrap.servers": strict_kafka.bootstrap})
        admin.delete_topics([f"{topic}.dlq"])[f"{topic}.dlq"].result(60)
        wait_until(
            lambda: f"{topic}.dlq" not in admin.list_topics(timeout=10).topics,
            timeout=60,
            message="the dead-letter topic deleted",
        )
        published += publish_with_poison(strict_kafka, topic, 20)  # poison at offset 30
        with pytest.raises(Exception, match="not delivered to the dead-letter topic"):
            run_to(driver, tmp_path, published)
        # The epoch of offsets 30..40 failed: the offsets never went past the poison one.
        assert driver.pipeline.source_op.offsets() == {f"{topic}:0": 30}  # type: ignore[union-attr]
    finally:
        driver.close()
    # A new run (from the latest checkpoint) creates the topic again and goes on.
    driver = make_driver(spark, strict_kafka, job, topic, tmp_path)
    try:
        run_to(driver, tmp_path, published)
    finally:
        driver.close()
    assert committed_ids(tmp_path) == sorted(published)  # each record exactly once
    assert [h[ORIGIN_HEADER] for _, h in dead_letters(strict_kafka, f"{topic}.dlq")] == [
        f"{topic}:0:30".encode()
    ]


def test_no_client_of_the_source_outlives_its_job(
    spark: SparkSession, strict_kafka: LocalKafka, tmp_path: Path
) -> None:
    job, topic, _ = ks.fresh_topics(strict_kafka, partitions=2)
    published = publish_with_poison(strict_kafka, topic, 0)
    broker = {n.port: StoppedServer("Kafka", "127.0.0.1", n.port) for n in strict_kafka.nodes}
    driver = make_driver(spark, strict_kafka, job, topic, tmp_path)
    try:
        run_to(driver, tmp_path, published)
        # While the job runs, its clients are connected (the check sees them).
        assert connected_to(os.getpid(), broker)
    finally:
        driver.close()
    # Its end closed them all: the driver's (admin, group consumer) and the executors'
    # (consumers, dead-letter producers), whichever Python worker ran the reads.
    assert connected_to(os.getpid(), broker) == []


def test_a_topic_given_as_a_string_is_that_topic_alone(strict_kafka: LocalKafka) -> None:
    stem = uuid.uuid4().hex[:8]
    ks.kafka_orders.create_topics(strict_kafka.bootstrap, {f"o-{stem}": 1, f"o-{stem}-eu": 1})
    ks.publish(strict_kafka, f"o-{stem}", 0, 3)
    ks.publish(strict_kafka, f"o-{stem}-eu", 3, 4)
    # "o-<stem>" is in "o-<stem>-eu": a name must never match as a substring.
    source = KafkaSource(strict_kafka.bootstrap, topics=f"o-{stem}-eu", name=f"o-{stem}")
    try:
        ranges = source.plan_epoch()
    finally:
        source.close()
    assert [(r.split, r.end - r.start) for r in ranges] == [(f"o-{stem}-eu:0", 4)]


@pytest.mark.parametrize(
    ("topics", "error"),
    [
        (b"orders", "not bytes"),
        (42, "not int"),
        (["orders", 7], "7 is not a topic name"),
        (["orders", ""], "'' is not a topic name"),
        ({"orders": 1}, "not dict"),
    ],
)
def test_topics_of_a_wrong_type_are_refused_by_name(topics: object, error: str) -> None:
    with pytest.raises(TypeError, match=error):
        KafkaSource("127.0.0.1:9", topics=topics)  # type: ignore[arg-type]
