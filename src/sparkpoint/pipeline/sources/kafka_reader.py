"""The Kafka source's executor side: the read of one partition's fixed range, and the
dead letters of its poison records (the driver side, which fixes the ranges: kafka.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from sparkpoint.pipeline.sources.base import EpochRange

#: The source's one logger, driver and executor side alike.
log = logging.getLogger("sparkpoint.pipeline.sources.kafka")

#: Headers of a dead-lettered record.
ORIGIN_HEADER, REASON_HEADER = "x-sparkpoint-origin", "x-sparkpoint-reason"
UNDECODABLE = "undecodable"


def json_value(value: bytes | None) -> Any:
    if value is None:
        raise ValueError("a record without a value (a tombstone)")
    return json.loads(value.decode("utf-8"))


def split_name(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def parse_split(split: str) -> tuple[str, int]:
    topic, _, partition = split.rpartition(":")
    return topic, int(partition)


class DeadLetterError(RuntimeError):
    """Poison records could not be put in the dead-letter topic (or the topic could not be
    created): the epoch fails, so the offsets never move past records that went nowhere."""


@dataclass(frozen=True, slots=True)
class KafkaReader:
    """Executor side: reads one partition's fixed range (picklable). Each read opens its
    own consumer and closes it when the range is read: a client never outlives the task
    that uses it (a cached one would keep reconnecting, from a long-lived Python worker,
    to a broker that is gone, and connect to whatever listens on its port next)."""

    bootstrap: str
    source: str
    deserialize: Callable[[bytes | None], Any]
    dead_letter_topic: str
    client_config: tuple[tuple[str, Any], ...] = ()
    stall_timeout_s: float = 120.0
    dead_letter_timeout_s: float = 60.0

    def read(self, split: EpochRange) -> Iterator[tuple[int, Any]]:
        topic, partition = parse_split(split.split)
        consumer = Consumer(self._consumer_config())
        dead_letters = _DeadLetters(self, split.split)
        try:
            yield from self._read(consumer, dead_letters, topic, partition, split)
            dead_letters.confirm()
        finally:
            consumer.close()
            dead_letters.close()

    def _read(
        self,
        consumer: Consumer,
        dead_letters: _DeadLetters,
        topic: str,
        partition: int,
        split: EpochRange,
    ) -> Iterator[tuple[int, Any]]:
        consumer.assign([TopicPartition(topic, partition, split.start)])
        position = split.start
        last_progress = time.monotonic()
        while position < split.end:
            messages = consumer.consume(min(10_000, split.end - position), timeout=1.0)
            for message in messages:
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(message.error())
                offset = message.offset()
                if offset >= split.end:
                    position = split.end
                    break
                position = offset + 1
                try:
                    record = self.deserialize(message.value())
                except Exception as exc:  # any failure to decode makes it a poison record
                    dead_letters.send(message, exc)
                    continue
                yield offset, record
            if position < split.end:
                # Control records (transaction markers) and aborted records are skipped
                # by the client without a message; its position tells how far it got.
                (now,) = consumer.position([TopicPartition(topic, partition)])
                position = max(position, now.offset)
            if messages or position >= split.end:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > self.stall_timeout_s:
                raise TimeoutError(
                    f"source {self.source}: {split.split} stuck at offset {position}, "
                    f"range ends at {split.end}"
                )

    def _consumer_config(self) -> dict[str, Any]:
        return {
            **dict(self.client_config),
            "bootstrap.servers": self.bootstrap,
            "group.id": "sparkpoint-reader",  # never joins, never commits: assign() only
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
            # A range ends at or below the stable offset: never park a fetch at the
            # log's end waiting for more (it delays the next range's first fetch).
            "fetch.wait.max.ms": 10,
        }


class _DeadLetters:
    """The poison records of one read, produced to the dead-letter topic. The producer is
    opened at the first of them; :meth:`confirm` returns once the broker acknowledged
    every one and raises :class:`DeadLetterError` otherwise (the read, and so the epoch,
    fails; the records are read again when the epoch is)."""

    def __init__(self, reader: KafkaReader, split: str) -> None:
        self._reader = reader
        self._split = split
        self._producer: Producer | None = None
        self._sent = 0
        self._failures: list[str] = []

    def send(self, message: Any, exc: Exception) -> None:
        reader = self._reader
        origin = f"{message.topic()}:{message.partition()}:{message.offset()}"
        log.warning(
            "source %s: record %s undecodable (%s); dead-lettered", reader.source, origin, exc
        )
        if self._producer is None:
            self._producer = Producer(
                {
                    **dict(reader.client_config),
                    "bootstrap.servers": reader.bootstrap,
                    "enable.idempotence": True,
                    # A record not delivered by then fails the epoch (the default is 5 min).
                    "message.timeout.ms": int(reader.dead_letter_timeout_s * 1000),
                }
            )
        while True:
            try:
                self._producer.produce(
                    reader.dead_letter_topic,
                    value=message.value(),
                    key=message.key(),
                    headers=[(ORIGIN_HEADER, origin.encode()), (REASON_HEADER, str(exc).encode())],
                    on_delivery=self._delivered,
                )
                break
            except BufferError:
                self._producer.poll(0.1)  # the local queue is full: let it drain
        self._sent += 1

    def _delivered(self, err: KafkaError | None, message: Any) -> None:
        if err is not None:
            self._failures.append(err.str())

    def confirm(self) -> None:
        if self._producer is None:
            return
        undelivered = self._producer.flush(self._reader.dead_letter_timeout_s + 5)
        if undelivered or self._failures:
            lost = undelivered + len(self._failures)
            why = self._failures[0] if self._failures else "no acknowledgement in time"
            raise DeadLetterError(
                f"source {self._reader.source}: {lost} of {self._sent} poison records of "
                f"{self._split} not delivered to the dead-letter topic "
                f"{self._reader.dead_letter_topic!r} ({why}); the epoch fails, its offsets stay"
            )
        from sparkpoint.metrics import SOURCE_DEAD_LETTERED

        SOURCE_DEAD_LETTERED.labels(source=self._reader.source, reason=UNDECODABLE).inc(self._sent)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.purge()  # what was not delivered by now fails the read anyway
            self._producer.close()
            self._producer = None
