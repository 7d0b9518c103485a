"""RabbitMQ → keyed state → PostgreSQL: the connector example, its publisher and its
exactly-once verification (used by the tests, ``sparkpoint demo --source rabbitmq
--sink postgres`` and the benchmark).

Message ``i`` is ``{"id": "m-<i>", "key": "k-<i mod keys>", "amount": …}`` with
``message_id`` = its id. The keyed function counts each key's messages; each message
becomes one row ``(message_id, key, seq)`` where ``seq`` is the key's running count. So
the table shows both halves of exactly-once: every published id in exactly one row (the
sink and the source's dedup), and every key's ``seq`` values exactly 1..n (the state
counted each message once, across restores and rescaling).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.pipeline import (
    Context,
    KeyedProcessFunction,
    Pipeline,
    PostgresSink,
    RabbitMQSource,
    RuntimeContext,
    ValueStateDescriptor,
)

TABLE = "orders_seen"
CREATE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} "
    "(message_id text NOT NULL, key text NOT NULL, seq bigint NOT NULL, amount bigint NOT NULL)"
)
_COUNT = ValueStateDescriptor("count", default=0)


class CountPerKey(KeyedProcessFunction):
    def open(self, ctx: RuntimeContext) -> None:
        self.count = ctx.get_state(_COUNT)

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        seq = self.count.value() + 1
        self.count.update(seq)
        ctx.collect((value["id"], key, seq, value["amount"]))


def message(i: int, keys: int) -> tuple[str, bytes]:
    """Message ``i``: its id and body."""
    mid = f"m-{i:08d}"
    body = {"id": mid, "key": f"k-{i % keys:04d}", "amount": (i * 7919) % 1000}
    return mid, json.dumps(body).encode()


def orders_pipeline(
    job_id: str,
    amqp_url: str,
    queue: str,
    conninfo: str,
    *,
    parallelism: int = 4,
    prefetch: int = 5000,
    batch_size: int = 5000,
) -> Pipeline:
    source = RabbitMQSource(
        amqp_url, queue, consumers=parallelism, prefetch=prefetch, batch_size=batch_size
    )
    sink = PostgresSink(
        conninfo,
        TABLE,
        ("message_id", "key", "seq", "amount"),
        tuple,
        create_table=CREATE_TABLE,
    )
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(source)
        .key_by(key_of)
        .process(CountPerKey())
        .sink(sink)
    )


def key_of(record: dict[str, Any]) -> str:
    return str(record["key"])


def publish(amqp_url: str, queue: str, first: int, count: int, keys: int) -> None:
    """Publish messages ``first`` … ``first + count - 1`` persistently, with confirms."""
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = connection.channel()
        channel.queue_declare(queue, durable=True)
        channel.confirm_delivery()
        for i in range(first, first + count):
            mid, body = message(i, keys)
            properties = pika.BasicProperties(message_id=mid, delivery_mode=2)
            channel.basic_publish("", queue, body, properties)
    finally:
        connection.close()


@dataclass
class Verification:
    """Published ids against committed rows."""

    published: int
    rows: int
    missing: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    bad_keys: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected or self.bad_keys)

    def summary(self) -> str:
        verdict = "PASSED" if self.ok else "FAILED"
        return (
            f"exactly-once {verdict}: {self.published} published, {self.rows} rows; "
            f"missing {len(self.missing)} {self.missing[:5]}, duplicated "
            f"{len(self.duplicated)} {self.duplicated[:5]}, unexpected {len(self.unexpected)}, "
            f"keys with a broken count {len(self.bad_keys)} {self.bad_keys[:5]}"
        )


def check_rows(published: Iterable[str], rows: Iterable[tuple[str, str, int]]) -> Verification:
    """Every published id in exactly one row; every key's seq exactly 1..n."""
    expected = set(published)
    seen: dict[str, int] = {}
    seqs: dict[str, list[int]] = {}
    n = 0
    for message_id, key, seq in rows:
        n += 1
        seen[message_id] = seen.get(message_id, 0) + 1
        seqs.setdefault(key, []).append(seq)
    return Verification(
        published=len(expected),
        rows=n,
        missing=sorted(expected - seen.keys()),
        duplicated=sorted(m for m, c in seen.items() if c > 1),
        unexpected=sorted(seen.keys() - expected),
        bad_keys=sorted(k for k, s in seqs.items() if sorted(s) != list(range(1, len(s) + 1))),
    )


def verify(conninfo: str, published: Iterable[str]) -> Verification:
    import psycopg

    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(f"SELECT message_id, key, seq FROM {TABLE}").fetchall()
    return check_rows(published, rows)
