"""Shared pieces of the Kafka connector tests: topics, published ids, in-process runs."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, TopicPartition

from sparkpoint.examples import kafka_orders
from sparkpoint.examples.orders import Verification
from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from sparkpoint.pipeline.sinks.kafka import KafkaSink
from sparkpoint.pipeline.sources.kafka import KafkaSource
from tests.examples.support import run_until
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEYS = 7


def fresh_topics(kafka: LocalKafka, partitions: int = 6) -> tuple[str, str, str]:
    """A job id, an input topic with ``partitions`` partitions and a 1-partition output."""
    suffix = uuid.uuid4().hex[:8]
    job, source, out = f"korders-{suffix}", f"in-{suffix}", f"out-{suffix}"
    kafka_orders.create_topics(kafka.bootstrap, {source: partitions, out: 1})
    return job, source, out


def publish(kafka: LocalKafka, topic: str, first: int, count: int) -> list[str]:
    return kafka_orders.publish(kafka.bootstrap, topic, first, count, KEYS)


def output(kafka: LocalKafka, topic: str) -> list[Any]:
    return kafka_orders.read_committed(kafka.bootstrap, topic)


def settled_output(kafka: LocalKafka, topic: str) -> list[Any]:
    """:func:`output` once no transaction is open in ``topic``: a commit's (or abort's)
    markers reach the partitions after ``commit_transaction`` returned, and until then a
    ``read_committed`` reader stops short of the transaction's records."""
    wait_until(
        lambda: _last_stable_is_high_watermark(kafka.bootstrap, topic),
        timeout=60,
        message=f"every transaction in {topic} ended",
    )
    return output(kafka, topic)


def _last_stable_is_high_watermark(bootstrap: str, topic: str) -> bool:
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "sparkpoint-check",
             "isolation.level": isolation}
        )  # fmt: skip
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            ends.append(
                [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30,
                                                cached=False)[1] for p in sorted(partitions)]
            )  # fmt: skip
        finally:
            consumer.close()
    return ends[0] == ends[1]


def make_driver(
    spark: SparkSession,
    kafka: LocalKafka,
    job: str,
    source: str,
    out: str,
    ckpt: Path,
    *,
    parallelism: int = 2,
    per_partition: int = 40,
    interval_ms: int = 200,
    restore_from: str | None = None,
    **options: Any,
) -> PipelineDriver:
    pipeline = kafka_orders.kafka_orders_pipeline(
        job,
        kafka.bootstrap,
        source,
        out,
        parallelism=parallelism,
        max_records_per_partition=per_partition,
        **options,
    )
    channel = EmbeddedChannel(str(ckpt), interval_ms=interval_ms)
    driver = PipelineDriver(pipeline, spark, channel, restore_from=restore_from)
    driver.start()
    return driver


def close(driver: PipelineDriver) -> None:
    driver.close()
    source, sink = driver.pipeline.source_op, driver.pipeline.sink_op
    if isinstance(source, KafkaSource):
        source.close()
    if isinstance(sink, KafkaSink):
        sink.close()


def run_until_output(driver: PipelineDriver, kafka: LocalKafka, out: str, count: int) -> None:
    run_until(driver, lambda: len(output(kafka, out)) >= count, f"{count} output records committed")


def verified(kafka: LocalKafka, out: str, published: list[str]) -> Verification:
    settled_output(kafka, out)
    result = kafka_orders.verify(kafka.bootstrap, out, published)
    assert result.ok, result.summary()
    return result
