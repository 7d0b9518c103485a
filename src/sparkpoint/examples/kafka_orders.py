"""Kafka → keyed state → Kafka: the orders example on Kafka, its publisher and its
exactly-once check (used by the tests, ``sparkpoint demo --source kafka --sink kafka``
and the benchmark).

The records and the keyed function are the orders example's (``orders.py``): record ``i``
is ``{"id": "m-<i>", "key": …, "amount": …}``; each becomes one output record
``[id, key, seq, amount]`` where ``seq`` is the key's running count. The check reads the
output topic with a ``read_committed`` consumer: every published id exactly once, and
every key's ``seq`` exactly 1..n.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from sparkpoint.examples.orders import CountPerKey, Verification, check_rows, key_of
from sparkpoint.examples.orders import message as order_message
from sparkpoint.pipeline import KafkaSink, KafkaSource, Pipeline, create_topics

__all__ = ["create_topics", "kafka_orders_pipeline", "publish", "read_committed", "verify"]


def kafka_orders_pipeline(
    job_id: str,
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    *,
    parallelism: int = 4,
    max_records_per_partition: int = 5000,
    exactly_once: bool = True,
    bounded: bool = False,
    discovery_interval_s: float = 5.0,
) -> Pipeline:
    source = KafkaSource(
        bootstrap,
        topics=(input_topic,),
        name=input_topic,
        max_records_per_partition=max_records_per_partition,
        bounded=bounded,
        discovery_interval_s=discovery_interval_s,
    )
    sink = KafkaSink(bootstrap, output_topic, exactly_once=exactly_once)
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(source)
        .key_by(key_of)
        .process(CountPerKey())
        .sink(sink)
    )


def publish(bootstrap: str, topic: str, first: int, count: int, keys: int) -> list[str]:
    """Produce records ``first`` … ``first + count - 1`` (keyed, so a key's records stay
    in one partition in order); returns their ids."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    ids = []
    for i in range(first, first + count):
        mid, body = order_message(i, keys)
        key = json.loads(body)["key"].encode()
        _produce(producer, topic, key, body)
        ids.append(mid)
    if producer.flush(60) > 0:
        raise TimeoutError(f"records {first}..{first + count - 1} not delivered to {topic}")
    return ids


def _produce(producer: Any, topic: str, key: bytes | None, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key)
            return
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let it drain


def read_committed(bootstrap: str, topic: str, *, timeout_s: float = 60.0) -> list[Any]:
    """Every record a ``read_committed`` consumer sees in ``topic`` now (JSON values)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic, timeout=timeout_s).topics[topic].partitions
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "sparkpoint-check",
         "enable.auto.commit": False, "isolation.level": "read_committed"}
    )  # fmt: skip
    try:
        out: list[Any] = []
        for p in sorted(partitions):
            tp = TopicPartition(topic, p)
            low, end = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
            if end <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + timeout_s
            while consumer.position([tp])[0].offset < end:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}:{p} not read to {end} in {timeout_s} s")
                for m in consumer.consume(10_000, timeout=0.5):
                    if m.error() is None and m.offset() < end:
                        out.append(json.loads(m.value()))
        return out
    finally:
        consumer.close()


def verify(bootstrap: str, topic: str, published: Iterable[str]) -> Verification:
    rows = [(r[0], r[1], r[2]) for r in read_committed(bootstrap, topic)]
    return check_rows(published, rows)
