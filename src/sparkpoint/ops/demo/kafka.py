"""`sparkpoint demo --source kafka --sink kafka`: the Kafka half of the demo.

Starts a local Kafka (one KRaft node), produces the orders example's records at a steady
rate (with a poison record now and then), gives the pipeline command (the orders job's
Kafka variant), and at the end — producer stopped, every record given time to reach the
output — reads the output topic with a ``read_committed`` consumer: each produced record
exactly once, every key's running count 1..n, and every poison record in the dead-letter
topic (counted by origin: a replayed epoch may dead-letter a record twice).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import ClassVar

from sparkpoint.ops.demo.feed import KEYS, OrdersFeed
from sparkpoint.ops.devcluster.kafka import LocalKafka

INPUT, OUTPUT = "orders", "orders-seen"
DEAD_LETTER = f"{INPUT}.dlq"
PARTITIONS = 4


@dataclass
class KafkaDemo(OrdersFeed):
    kafka: LocalKafka | None = None
    publisher_join_s: ClassVar[float] = 90.0

    def start_servers(self) -> None:
        from sparkpoint.examples.kafka_orders import create_topics

        self.kafka = LocalKafka(self.directory / "kafka").start()
        create_topics(self.kafka.bootstrap, {INPUT: PARTITIONS, OUTPUT: 1, DEAD_LETTER: 1})

    def addresses(self) -> dict[str, str]:
        assert self.kafka is not None
        return {"kafka": self.kafka.bootstrap}

    def pipeline_args(self) -> list[str]:
        assert self.kafka is not None
        return [
            "sparkpoint.examples.run_orders",
            "--bootstrap", self.kafka.bootstrap,
            "--input-topic", INPUT, "--output-topic", OUTPUT,
        ]  # fmt: skip

    def _publish(self) -> None:
        from confluent_kafka import Producer

        from sparkpoint.examples.orders import message

        assert self.kafka is not None
        producer = Producer({"bootstrap.servers": self.kafka.bootstrap, "enable.idempotence": True})

        def send(n: int) -> None:
            _, body = message(n, KEYS)
            producer.produce(INPUT, body, key=json.loads(body)["key"].encode())

        # The publishing tick serves the producer's delivery callbacks.
        self._paced(
            lambda _: producer.produce(INPUT, b"\xff{not json"), send, lambda: producer.poll(0.05)
        )
        if producer.flush(60) > 0:
            raise RuntimeError("the demo's producer could not deliver every record")

    def rows(self) -> int:
        from sparkpoint.examples.kafka_orders import read_committed

        assert self.kafka is not None
        try:
            return len(read_committed(self.kafka.bootstrap, OUTPUT, timeout_s=10))
        except Exception:  # a broker that is not answering counts as nothing yet
            return 0

    def verify(self) -> bool:
        from sparkpoint.examples.kafka_orders import verify
        from sparkpoint.examples.orders import message

        assert self.kafka is not None
        ids = [message(i, KEYS)[0] for i in range(self.published)]
        result = verify(self.kafka.bootstrap, OUTPUT, ids)
        dead = len(dead_lettered_origins(self.kafka.bootstrap, DEAD_LETTER))
        return self._judge(result, dead)

    def close(self) -> None:
        self.stop_publisher()
        if self.kafka is not None:
            self.kafka.stop()


def dead_lettered_origins(bootstrap: str, topic: str, timeout_s: float = 30.0) -> set[str]:
    """The distinct ``topic:partition:offset`` origins of the records in ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    from sparkpoint.pipeline.sources.kafka import ORIGIN_HEADER

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sparkpoint-check"})
    try:
        tp = TopicPartition(topic, 0)
        low, end = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
        consumer.assign([TopicPartition(topic, 0, low)])
        origins: set[str] = set()
        deadline = time.monotonic() + timeout_s
        while end > low and consumer.position([tp])[0].offset < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not read to {end} in {timeout_s} s")
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None:
                    origins.add(dict(m.headers() or [])[ORIGIN_HEADER].decode())
        return origins
    finally:
        consumer.close()
