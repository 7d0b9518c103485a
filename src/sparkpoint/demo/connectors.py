"""`sparkpoint demo --source rabbitmq --sink postgres`: the connector half of the demo.

Starts a local RabbitMQ broker and PostgreSQL server, publishes the orders example's
messages at a steady rate (with a poison message now and then), gives the pipeline
command, and at the end — publisher stopped, every published message given time to
reach the table — verifies that each published message is in PostgreSQL exactly once
and every poison message is in the dead-letter queue.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.devcluster.system_servers import PostgresServer, RabbitMQServer

log = logging.getLogger(__name__)

QUEUE = "orders"
KEYS = 50
#: Every this many messages one poison message (an undecodable body) is published.
POISON_EVERY = 500


@dataclass
class QueueDemo:
    directory: Path
    rate_per_s: float = 100.0
    rabbitmq: RabbitMQServer | None = None
    postgres: PostgresServer | None = None
    published: int = 0
    poisoned: int = 0
    verification: dict[str, Any] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pg_dir: Path | None = None

    def start_servers(self) -> None:
        self.rabbitmq = RabbitMQServer(self.directory / "rabbitmq").start()
        # Not under a private (0700) directory: the server runs as the postgres user.
        self._pg_dir = Path(tempfile.mkdtemp(prefix="sparkpoint-demo-pg-"))
        self.postgres = PostgresServer(self._pg_dir).start()

    def addresses(self) -> dict[str, str]:
        assert self.rabbitmq is not None and self.postgres is not None
        return {"rabbitmq": self.rabbitmq.url, "postgres": self.postgres.conninfo}

    def pipeline_args(self) -> list[str]:
        assert self.rabbitmq is not None and self.postgres is not None
        return [
            "sparkpoint.pipeline.examples.run_orders",
            "--amqp-url", self.rabbitmq.url, "--queue", QUEUE,
            "--conninfo", self.postgres.conninfo,
        ]  # fmt: skip

    def start_publisher(self) -> None:
        self._thread = threading.Thread(target=self._publish, name="publisher", daemon=True)
        self._thread.start()

    def _publish(self) -> None:
        import pika

        from sparkpoint.pipeline.examples.orders import message

        assert self.rabbitmq is not None
        connection = pika.BlockingConnection(pika.URLParameters(self.rabbitmq.url))
        try:
            channel = connection.channel()
            channel.queue_declare(QUEUE, durable=True)
            channel.confirm_delivery()
            persistent = 2
            started = time.monotonic()
            while not self._stop.is_set():
                due = int((time.monotonic() - started) * self.rate_per_s)
                while self.published < due and not self._stop.is_set():
                    if (self.published + self.poisoned) % POISON_EVERY == POISON_EVERY - 1:
                        props = pika.BasicProperties(
                            message_id=f"poison-{self.poisoned}", delivery_mode=persistent
                        )
                        channel.basic_publish("", QUEUE, b"\xff{not json", props)
                        self.poisoned += 1
                        continue
                    mid, body = message(self.published, KEYS)
                    props = pika.BasicProperties(message_id=mid, delivery_mode=persistent)
                    channel.basic_publish("", QUEUE, body, props)
                    self.published += 1
                connection.process_data_events(time_limit=0.05)  # the publishing tick
        finally:
            connection.close()

    def stop_publisher(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def rows(self) -> int:
        import psycopg

        from sparkpoint.pipeline.examples.orders import TABLE

        assert self.postgres is not None
        try:
            with psycopg.connect(self.postgres.conninfo) as conn:
                row = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        except psycopg.Error:
            return 0
        return int(row[0]) if row else 0

    def drained(self) -> bool:
        """Every published message has a committed row (or more: the check says)."""
        return self.rows() >= self.published

    def verify(self) -> bool:
        import pika

        from sparkpoint.pipeline.examples.orders import message, verify

        assert self.rabbitmq is not None and self.postgres is not None
        ids = [message(i, KEYS)[0] for i in range(self.published)]
        result = verify(self.postgres.conninfo, ids)
        connection = pika.BlockingConnection(pika.URLParameters(self.rabbitmq.url))
        try:
            dlq = connection.channel().queue_declare(f"{QUEUE}.dlq", passive=True)
            dead = int(dlq.method.message_count)
        except pika.exceptions.ChannelClosedByBroker:
            dead = 0
        finally:
            if connection.is_open:
                connection.close()
        ok = result.ok and dead == self.poisoned
        self.verification = {
            "ok": ok,
            "summary": result.summary(),
            "published": self.published,
            "rows": result.rows,
            "missing": len(result.missing),
            "duplicated": len(result.duplicated),
            "poisoned": self.poisoned,
            "dead_lettered": dead,
        }
        return ok

    def close(self) -> None:
        self.stop_publisher()
        if self.rabbitmq is not None:
            self.rabbitmq.close()
        if self.postgres is not None:
            self.postgres.close()
        if self._pg_dir is not None:
            shutil.rmtree(self._pg_dir, ignore_errors=True)
