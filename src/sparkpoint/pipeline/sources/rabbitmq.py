"""A RabbitMQ source on the message-acknowledging base (Flink's ``RMQSource``), with pika.

One consumer (channel) per source subtask, manual acks, ``prefetch`` unacknowledged
messages per consumer at most: the broker stops delivering while a consumer's messages
wait for their checkpoint, which is the backpressure. A message's id is its
``message_id`` property, else its ``correlation_id``. Poison messages are published to
the dead-letter queue with publisher confirms, and only then acknowledged. A lost
connection is re-opened at the next fetch; tags of the old connection are dropped (the
broker delivers those messages again and their ids drop them, see the base).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pika
from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection
from pika.exceptions import AMQPError

from sparkpoint.pipeline.sources.acknowledging import (
    BrokerUnavailable,
    Delivery,
    MessageAcknowledgingSource,
)

log = logging.getLogger(__name__)

#: Header of a dead-lettered message: why it was moved.
REASON_HEADER = "x-sparkpoint-reason"


def json_body(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


class RabbitMQSource(MessageAcknowledgingSource):
    """``url``: an AMQP URL (``amqp://guest:guest@localhost:5672/%2F``). ``queue`` and
    ``dead_letter_queue`` (default ``<queue>.dlq``) are declared durable if missing.
    ``consumers``: one per source subtask. ``poll_s``: how long one fetch waits for
    messages when none are there."""

    def __init__(
        self,
        url: str,
        queue: str,
        *,
        consumers: int = 4,
        prefetch: int = 5000,
        dead_letter_queue: str | None = None,
        deserialize: Callable[[bytes], Any] = json_body,
        poll_s: float = 0.1,
        **options: Any,
    ) -> None:
        if consumers < 1 or prefetch < 1:
            raise ValueError("a RabbitMQ source needs at least one consumer and prefetch ≥ 1")
        options.setdefault("name", queue)
        options.setdefault("splits", consumers)
        super().__init__(deserialize=deserialize, **options)
        self.url = url
        self.queue = queue
        self.dead_letter_queue = dead_letter_queue or f"{queue}.dlq"
        self.consumers = consumers
        self.prefetch = prefetch
        self.poll_s = poll_s
        self._connection: BlockingConnection | None = None
        self._channels: list[BlockingChannel] = []
        self._publisher: BlockingChannel | None = None
        self._received: list[Delivery] = []
        self._generation = 0

    # -- connection --------------------------------------------------------------------

    def _connect(self) -> BlockingConnection:
        if self._connection is not None and self._connection.is_open:
            return self._connection
        self._drop_connection()
        connection = pika.BlockingConnection(pika.URLParameters(self.url))
        self._generation += 1
        generation = self._generation
        try:
            publisher = connection.channel()
            publisher.queue_declare(self.queue, durable=True)
            publisher.queue_declare(self.dead_letter_queue, durable=True)
            publisher.confirm_delivery()
            channels = []
            for index in range(self.consumers):
                channel = connection.channel()
                channel.basic_qos(prefetch_count=self.prefetch)

                def receive(
                    ch: BlockingChannel, method: Any, props: Any, body: bytes, index: int = index
                ) -> None:
                    message_id = props.message_id or props.correlation_id or None
                    tag = (generation, index, method.delivery_tag)
                    self._received.append(Delivery(message_id, tag, body, _props(props)))

                channel.basic_consume(self.queue, receive, auto_ack=False)
                channels.append(channel)
        except BaseException:
            _close_quietly(connection)
            raise
        self._connection, self._channels, self._publisher = connection, channels, publisher
        log.info("source %s: connected, %d consumers", self.name, self.consumers)
        return connection

    def _drop_connection(self) -> None:
        if self._connection is not None:
            _close_quietly(self._connection)
        self._connection, self._channels, self._publisher = None, [], None
        self._received = []  # their tags die with the connection: redelivered

    # -- the base's broker operations --------------------------------------------------

    def fetch(self, max_messages: int) -> list[Delivery]:
        try:
            connection = self._connect()
            if not self._received:
                connection.process_data_events(time_limit=self.poll_s)
            connection.process_data_events(time_limit=0)
        except AMQPError as exc:
            log.warning("source %s: broker connection lost (%s); reconnecting", self.name, exc)
            self._drop_connection()
            return []
        out, self._received = self._received[:max_messages], self._received[max_messages:]
        return out

    def lag(self) -> int | None:
        """Messages ready in the queue, not yet delivered to this source (None while
        the broker cannot be asked); shown as the job's source lag in the UI."""
        if self._publisher is None or not self._publisher.is_open:
            return None
        try:
            declared = self._publisher.queue_declare(self.queue, passive=True)
        except AMQPError:
            return None
        return int(declared.method.message_count)

    def acknowledge(self, tags: list[Any]) -> None:
        live = [t for t in tags if t[0] == self._generation]
        if len(live) < len(tags):
            log.info(
                "source %s: %d acks of an earlier connection skipped (redelivered instead)",
                self.name,
                len(tags) - len(live),
            )
        if not live or self._connection is None:
            return
        try:
            for _, index, delivery_tag in live:
                self._channels[index].basic_ack(delivery_tag)
            self._connection.process_data_events(time_limit=0)
        except AMQPError as exc:
            log.warning("source %s: acks lost with the connection (%s)", self.name, exc)
            self._drop_connection()

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        if delivery.tag[0] != self._generation:
            raise BrokerUnavailable("its connection is gone")
        headers = {**delivery.headers.get("headers", {}), REASON_HEADER: reason}
        properties = pika.BasicProperties(
            delivery_mode=pika.DeliveryMode.Persistent,
            message_id=delivery.message_id,
            headers=headers,
        )
        try:
            assert self._publisher is not None
            # With confirms on, this returns once the broker has the message durably.
            self._publisher.basic_publish("", self.dead_letter_queue, delivery.body, properties)
        except AMQPError as exc:
            self._drop_connection()
            raise BrokerUnavailable(str(exc)) from exc
        self.acknowledge([delivery.tag])

    def close(self) -> None:
        self._drop_connection()


def _props(props: Any) -> dict[str, Any]:
    return {"headers": dict(props.headers or {})}


def _close_quietly(connection: BlockingConnection) -> None:
    try:
        if connection.is_open:
            connection.close()
    except AMQPError as exc:
        log.debug("closing a broken broker connection: %s", exc)
