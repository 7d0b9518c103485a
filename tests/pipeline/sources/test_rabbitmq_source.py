"""The RabbitMQ source against a real broker, without Spark: acks only after completion,
duplicates dropped after a restore, poison messages and messages without an id go to the
dead-letter queue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pika
import pytest
from prometheus_client import REGISTRY

from sparkpoint.ops.devcluster.system_servers import RabbitMQServer
from sparkpoint.pipeline.sources.acknowledging import MISSING_ID, UNDECODABLE
from sparkpoint.pipeline.sources.rabbitmq import REASON_HEADER, RabbitMQSource
from tests.examples import support
from tests.support.waiting import wait_until


@contextmanager
def source_on(rabbitmq: RabbitMQServer, queue: str, **kw: Any) -> Iterator[RabbitMQSource]:
    kw.setdefault("batch_size", 1000)
    source = RabbitMQSource(rabbitmq.url, queue, consumers=2, prefetch=100, **kw)
    try:
        yield source
    finally:
        source.close()


def records(source: RabbitMQSource) -> list[Any]:
    """Every record of the next epoch."""
    ranges = source.plan_epoch()
    reader = source.reader()
    return [r for split in ranges for _, r in reader.read(split)]


def drain(source: RabbitMQSource, count: int) -> list[Any]:
    got: list[Any] = []

    def more() -> bool:
        got.extend(records(source))
        return len(got) >= count

    wait_until(more, timeout=60, message=f"{count} records")
    return got


def queue_depth(rabbitmq: RabbitMQServer, queue: str) -> int:
    """Messages ready in ``queue`` (not delivered, or delivered and given back)."""
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.url))
    try:
        return int(connection.channel().queue_declare(queue, passive=True).method.message_count)
    finally:
        connection.close()


def test_acks_after_completion_and_duplicates_dropped_after_restore(
    rabbitmq: RabbitMQServer,
) -> None:
    _, queue = support.fresh_names()
    support.publish_range(rabbitmq, queue, 0, 30)
    with source_on(rabbitmq, queue) as first:
        got = drain(first, 30)
        assert sorted(r["id"] for r in got) == support.ids(0, 30)
        first.snapshot_state(1)
        state = first.offsets()
        first.notify_checkpoint_complete(0)  # an older checkpoint: acks nothing
        assert first.acknowledged == 0
    # The "crash": nothing was acknowledged, the broker gives every message back.
    wait_until(lambda: queue_depth(rabbitmq, queue) == 30, timeout=30, message="requeued")
    support.publish_range(rabbitmq, queue, 30, 5)
    with source_on(rabbitmq, queue) as second:
        second.restore(state)
        fresh = drain(second, 5)
        assert sorted(r["id"] for r in fresh) == support.ids(30, 5)
        wait_until(lambda: second.duplicates == 30 or records(second), timeout=30, message="dups")
        assert second.duplicates == 30
        second.snapshot_state(2)
        second.notify_checkpoint_complete(2)
        assert second.acknowledged == 5
    wait_until(lambda: queue_depth(rabbitmq, queue) == 0, timeout=30, message="all acked")


def _dead_lettered(source: str, reason: str) -> float:
    labels = {"source": source, "reason": reason}
    return REGISTRY.get_sample_value("sparkpoint_source_dead_lettered_total", labels) or 0.0


@pytest.mark.parametrize("at_least_once", [False, True])
def test_poison_and_id_less_messages(rabbitmq: RabbitMQServer, at_least_once: bool) -> None:
    _, queue = support.fresh_names()
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.url))
    channel = connection.channel()
    channel.queue_declare(queue, durable=True)
    good = json.dumps({"id": "a", "key": "k", "amount": 1}).encode()
    channel.basic_publish("", queue, b"\xff not json", pika.BasicProperties(message_id="poison"))
    channel.basic_publish("", queue, good, pika.BasicProperties())  # no id
    channel.basic_publish("", queue, good, pika.BasicProperties(correlation_id="a"))
    connection.close()
    with source_on(rabbitmq, queue, at_least_once=at_least_once) as source:
        got = drain(source, 2 if at_least_once else 1)
        assert [r["id"] for r in got] == ["a"] * len(got)
        assert source.dead_lettered == {UNDECODABLE: 1, MISSING_ID: 0 if at_least_once else 1}
        assert _dead_lettered(queue, UNDECODABLE) >= 1
        dlq = f"{queue}.dlq"
        wait_until(
            lambda: queue_depth(rabbitmq, dlq) == (1 if at_least_once else 2),
            timeout=30,
            message="dead letters",
        )
        connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.url))
        _, props, body = connection.channel().basic_get(dlq, auto_ack=True)
        connection.close()
        assert body == b"\xff not json" and props.headers[REASON_HEADER] == UNDECODABLE


def test_lag_is_what_waits_in_the_queue(rabbitmq: RabbitMQServer) -> None:
    _, queue = support.fresh_names()
    with source_on(rabbitmq, queue) as source:
        assert source.lag() is None  # not connected: nothing to ask
        support.publish_range(rabbitmq, queue, 0, 500)
        records(source)  # connects; 2 consumers x prefetch 100 hold 200 unacknowledged
        assert wait_until(lambda: source.lag() == 300, timeout=30, message="300 waiting")
