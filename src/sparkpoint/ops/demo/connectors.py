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
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.ops.demo.feed import KEYS, OrdersFeed
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer

log = logging.getLogger(__name__)

QUEUE = "orders"


@dataclass
class QueueDemo(OrdersFeed):
    rabbitmq: RabbitMQServer | None = None
    postgres: PostgresServer | None = None
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
            "sparkpoint.examples.run_orders",
            "--amqp-url", self.rabbitmq.url, "--queue", QUEUE,
            "--conninfo", self.postgres.conninfo,
        ]  # fmt: skip

    def _publish(self) -> None:
        import pika

        from sparkpoint.examples.orders import message

        assert self.rabbitmq is not None
        connection = pika.BlockingConnection(pika.URLParameters(self.rabbitmq.url))
        try:
            channel = connection.channel()
            channel.queue_declare(QUEUE, durable=True)
            channel.confirm_delivery()
            persistent = 2

            def poison(k: int) -> None:
                props = pika.BasicProperties(message_id=f"poison-{k}", delivery_mode=persistent)
                channel.basic_publish("", QUEUE, b"\xff{not json", props)

            def send(n: int) -> None:
                mid, body = message(n, KEYS)
                props = pika.BasicProperties(message_id=mid, delivery_mode=persistent)
                channel.basic_publish("", QUEUE, body, props)

            # The publishing tick lets pika handle the broker's confirms.
            self._paced(poison, send, lambda: connection.process_data_events(time_limit=0.05))
        finally:
            connection.close()

    def rows(self) -> int:
        import psycopg

        from sparkpoint.examples.orders import TABLE

        assert self.postgres is not None
        try:
            with psycopg.connect(self.postgres.conninfo) as conn:
                row = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        except psycopg.Error:
            return 0
        return int(row[0]) if row else 0

    def verify(self) -> bool:
        import pika

        from sparkpoint.examples.orders import message, verify

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
        return self._judge(result, dead)

    def close(self) -> None:
        self.stop_publisher()
        if self.rabbitmq is not None:
            self.rabbitmq.close()
        if self.postgres is not None:
            self.postgres.close()
        if self._pg_dir is not None:
            shutil.rmtree(self._pg_dir, ignore_errors=True)
