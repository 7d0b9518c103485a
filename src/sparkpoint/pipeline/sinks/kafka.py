"""A Kafka sink, exactly once: output staged in the checkpoint, produced when it completes.

librdkafka has no KIP-939 (a transaction prepared by one producer and committed by
another after a crash), so no Kafka transaction is ever left open across a checkpoint.
Instead (docs/kafka.md):

1. The epoch's outputs come to the driver (:class:`CollectingWriter`) and are serialised
   into the open batch. At the snapshot of checkpoint N the batch becomes *staged* batch N
   and is written into the checkpoint as the sink's operator state.
2. When N completes, every staged batch ≤ N is produced, in order, each in ONE Kafka
   transaction that also writes the record ``N`` to the sink's commit log (the topic
   ``<topic>.sparkpoint-commits``, one partition): the records and the record "batch N is
   in" become visible together, or not at all.
3. A restarted run (cold restart, standby, rescale) calls ``init_transactions`` with the
   same transactional id: Kafka fences the old producer
   and finishes its last transaction — commits it if its commit had been requested,
   aborts it otherwise. The run then reads the commit log's newest record M (the newest
   batch that is in) and produces the restored checkpoint's staged batches above M; those ≤ M are
   skipped. So each batch is in the output exactly once, and a ``read_committed``
   consumer sees it only after its checkpoint completed.

The transactional id — also the key of the sink's records in the commit log — is the
sink's *identity*, kept in its operator state: ``sparkpoint-<job>-<operator>`` of the job
that first ran the sink, inherited by every job restored from one of its checkpoints or
savepoints (another job id included). So a job started from a savepoint finds the
markers of the batches the savepoint's job produced and produces none of them again.

A Kafka transaction is open only while one batch is produced, so ``transaction.timeout.ms``
must cover producing one checkpoint's output, not the checkpoint interval; the sink still
checks the broker accepts it at start (``init_transactions``) and, when told the
checkpoint interval and timeout, that it covers them (as a two-phase-commit sink must).

``exactly_once=False``: at least once — an idempotent producer writes each epoch's outputs
at once and flushes at every snapshot; a restart may write some of them again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from sparkpoint.pipeline.sinks.base import CollectingWriter, EpochOutput
from sparkpoint.pipeline.sinks.kafka_admin import create_topics
from sparkpoint.pipeline.state import pickles

log = logging.getLogger(__name__)

Record = tuple[bytes | None, bytes]  # key, value
_CHUNK = 10_000  # records per operator-state element
_MAX_TOPIC_NAME = 249  # Kafka's limit


def json_record(value: Any) -> Record:
    return None, json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


class KafkaSinkError(RuntimeError):
    """The sink cannot go on (fenced by a newer run, or a setting Kafka refused)."""


@dataclass(frozen=True, slots=True)
class SinkIdentity:
    """The transactional id the sink's batches are produced and marked under (one
    operator-state element; a checkpoint without one is of a job that used its own
    ``sparkpoint-<job>-<operator>``, which is what the restoring job then takes)."""

    transactional_id: str


@dataclass(frozen=True, slots=True)
class StagedChunk:
    """Part of checkpoint ``checkpoint_id``'s staged batch (one operator-state element)."""

    checkpoint_id: int
    index: int
    records: tuple[Record, ...]


class KafkaSink:
    """``topic``: where outputs go; ``serialize(value)`` → ``(key, value)`` bytes (JSON
    value, no key by default). ``transaction_timeout_ms``: the producer's transaction
    timeout (the broker caps it at ``transaction.max.timeout.ms``)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        serialize: Callable[[Any], Record] = json_record,
        exactly_once: bool = True,
        transaction_timeout_ms: int = 900_000,
        client_config: dict[str, Any] | None = None,
        timeout_s: float = 60.0,
        retry_s: float = 300.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.serialize = serialize
        self.exactly_once = exactly_once
        self.transaction_timeout_ms = transaction_timeout_ms
        self.client_config = dict(client_config or {})
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.transactional_id = ""
        self._producer: Producer | None = None
        self._open: list[Record] = []
        self._staged: dict[int, list[Record]] = {}
        self._committed_through: int | None = None  # newest batch known to be in Kafka
        self.committed_records = 0

    def require_timeout_covers(self, interval_s: float, timeout_s: float) -> None:
        """Raise unless the transaction timeout covers a checkpoint interval plus its
        timeout (call where both are known, before the job starts)."""
        needed_ms = int((interval_s + timeout_s) * 1000)
        if self.transaction_timeout_ms < needed_ms:
            raise KafkaSinkError(
                f"KafkaSink({self.topic}): transaction_timeout_ms={self.transaction_timeout_ms}"
                f" is below the checkpoint interval + timeout ({needed_ms} ms); raise it "
                "(and the brokers' transaction.max.timeout.ms if needed)"
            )

    # -- the driver's protocol (see pipeline/sinks/files.py) ----------------------------------

    @property
    def commit_log(self) -> str:
        """The topic whose records say which of this sink's batches are in (one record
        per checkpoint): the sink identity's own, so that no other job's transaction —
        one a killed driver left open holds a partition's last stable offset until
        ``transaction.timeout.ms`` — is in front of the records a restore reads."""
        name = f"{self.topic}.sparkpoint-commits.{self.transactional_id}"
        if len(name) <= _MAX_TOPIC_NAME:
            return name
        digest = hashlib.sha256(self.transactional_id.encode()).hexdigest()[:16]
        return f"{name[: _MAX_TOPIC_NAME - 17]}-{digest}"

    @property
    def shared_commit_log(self) -> str:
        """The commit log every sink of the topic shared before each identity had its
        own; read only when the own one has no record yet (a job that ran before)."""
        return f"{self.topic}.sparkpoint-commits"

    def bind(self, job_id: str, operator_uid: str) -> None:
        """The identity of a first start; a restore replaces it by the checkpoint's."""
        self.transactional_id = f"sparkpoint-{job_id}-{operator_uid}"

    def writer(self, process_tag: str, epoch: int) -> CollectingWriter:
        return CollectingWriter()

    def epoch_written(self, outputs: Iterable[EpochOutput]) -> None:
        records = [self.serialize(v) for out in outputs for v in out.values]
        if self.exactly_once:
            self._open.extend(records)
        else:
            self._produce(records)

    def pre_commit(self, checkpoint_id: int) -> None:
        if not self.exactly_once:
            self._flush()
            return
        if self._open:
            self._staged[checkpoint_id], self._open = self._open, []

    def snapshot(self, parallelism: int) -> list[list[bytes]]:
        out: list[list[bytes]] = [[] for _ in range(parallelism)]
        out[0].append(pickles.dumps(SinkIdentity(self.transactional_id)))
        n = 1
        for cid, records in sorted(self._staged.items()):
            for index, start in enumerate(range(0, len(records), _CHUNK)):
                chunk = StagedChunk(cid, index, tuple(records[start : start + _CHUNK]))
                out[n % parallelism].append(pickles.dumps(chunk))
                n += 1
        return out

    def commit_up_to(self, checkpoint_id: int) -> int:
        done = 0
        for cid in sorted(c for c in self._staged if c <= checkpoint_id):
            self._commit(cid, self._staged.pop(cid))
            done += 1
        return done

    def restore(self, elements: Iterable[bytes]) -> None:
        """Take the checkpoint's identity, fence the previous run of it, learn which batch
        is in, and produce the restored ones above."""
        loaded = [pickles.loads(e) for e in elements]
        for identity in (e for e in loaded if isinstance(e, SinkIdentity)):
            if identity.transactional_id != self.transactional_id:
                log.info("sink %s: restored as %s (the checkpoint's identity)",
                         self.transactional_id, identity.transactional_id)  # fmt: skip
                self.close()  # a producer of the other id must not be used
                self.transactional_id = identity.transactional_id
        chunks = sorted(
            (e for e in loaded if isinstance(e, StagedChunk)),
            key=lambda c: (c.checkpoint_id, c.index),
        )
        self._open, self._staged = [], {}
        if not self.exactly_once:
            self._flush()
            return
        self._transactional_producer()
        self._committed_through = self._read_marker()
        log.info(
            "sink %s: batches through checkpoint %s are in %s; %d staged chunks restored",
            self.transactional_id, self._committed_through, self.topic, len(chunks),
        )  # fmt: skip
        restored: dict[int, list[Record]] = {}
        for chunk in chunks:
            restored.setdefault(chunk.checkpoint_id, []).extend(chunk.records)
        for cid in sorted(restored):
            self._commit(cid, restored[cid])

    # -- Kafka -------------------------------------------------------------------------

    def _commit(self, checkpoint_id: int, records: list[Record]) -> None:
        if self._committed_through is not None and checkpoint_id <= self._committed_through:
            log.info("sink %s: batch %d was committed before", self.transactional_id, checkpoint_id)
            return
        producer = self._transactional_producer()
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                producer.begin_transaction()
                for key, value in records:
                    self._send(producer, key, value)
                self._retrying(deadline, lambda: self._mark(producer, checkpoint_id))
                self._retrying(deadline, lambda: producer.commit_transaction(self.timeout_s))
                break
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal():
                    raise KafkaSinkError(
                        f"sink {self.transactional_id}: {error.str()} (fenced by a newer run?)"
                    ) from exc
                if not error.txn_requires_abort() or time.monotonic() > deadline:
                    raise
                log.warning("sink %s: transaction aborted (%s); again", self.topic, error.str())
                producer.abort_transaction(self.timeout_s)
        self._committed_through = checkpoint_id
        self.committed_records += len(records)

    def _mark(self, producer: Producer, checkpoint_id: int) -> None:
        """Record, in the transaction, that batch ``checkpoint_id`` is in. (A record, not
        ``send_offsets_to_transaction``: librdkafka's may block past its timeout while
        the group coordinator is away, e.g. during a broker restart.)"""
        self._send(producer, self.transactional_id.encode(), str(checkpoint_id).encode(),
                   self.commit_log)  # fmt: skip

    @staticmethod
    def _retrying(deadline: float, action: Callable[[], None]) -> None:
        """A retriable error (a broker restarting, a coordinator moving) is retried."""
        while True:
            try:
                action()
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                log.warning("Kafka: %s; retrying", exc.args[0].str())

    def _send(
        self, producer: Producer, key: bytes | None, value: bytes, topic: str | None = None
    ) -> None:
        while True:
            try:
                producer.produce(topic or self.topic, value=value, key=key)
                return
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let it drain

    def _produce(self, records: list[Record]) -> None:
        producer = self._idempotent_producer()
        for key, value in records:
            self._send(producer, key, value)
        producer.poll(0)
        self.committed_records += len(records)

    def _flush(self) -> None:
        if self._producer is not None and self._producer.flush(self.timeout_s) > 0:
            raise KafkaSinkError(f"sink {self.topic}: records not delivered in {self.timeout_s} s")

    def _base_config(self) -> dict[str, Any]:
        return {
            **self.client_config,
            "bootstrap.servers": self.bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
        }

    def _idempotent_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self._base_config())
        return self._producer

    def _transactional_producer(self) -> Producer:
        if self._producer is None:
            if not self.transactional_id:
                raise KafkaSinkError("KafkaSink used before bind(job, operator)")
            producer = Producer(
                {
                    **self._base_config(),
                    "transactional.id": self.transactional_id,
                    "transaction.timeout.ms": self.transaction_timeout_ms,
                }
            )
            try:
                # Fences every earlier producer of this id and completes its transaction.
                producer.init_transactions(self.timeout_s)
            except KafkaException as exc:
                _release(producer)
                raise KafkaSinkError(
                    f"sink {self.transactional_id}: Kafka refused the transactional producer "
                    f"({exc.args[0].str()}); is transaction_timeout_ms="
                    f"{self.transaction_timeout_ms} above the brokers' "
                    "transaction.max.timeout.ms?"
                ) from exc
            self._producer = producer
        return self._producer

    def close(self) -> None:
        """Release the producer (an open batch is not produced: its checkpoint never
        came). Idempotent; a sink used again opens a new one."""
        producer, self._producer = self._producer, None
        if producer is not None:
            with suppress(KafkaException):  # a fenced or failed producer still goes
                if producer.flush(self.timeout_s) > 0:
                    producer.purge()  # undeliverable (a broker away): close must not wait
            _release(producer)

    def _read_marker(self) -> int | None:
        """The newest checkpoint id in the commit log (read_committed), or None."""
        create_topics(self.bootstrap, {self.commit_log: 1})
        consumer = Consumer(
            {**self.client_config, "bootstrap.servers": self.bootstrap,
             "group.id": self.transactional_id, "enable.auto.commit": False,
             "isolation.level": "read_committed"}
        )  # fmt: skip
        try:
            newest = self._newest_of(consumer, self.commit_log)
            if newest is None and self._exists(consumer, self.shared_commit_log):
                newest = self._newest_of(consumer, self.shared_commit_log)
            return newest
        finally:
            consumer.close()

    def _exists(self, consumer: Consumer, topic: str) -> bool:
        found = consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
        return found is not None and found.error is None and bool(found.partitions)

    def _newest_of(self, consumer: Consumer, topic: str) -> int | None:
        tp = TopicPartition(topic, 0)
        low, end = consumer.get_watermark_offsets(tp, timeout=self.timeout_s, cached=False)
        window = 64  # each transaction adds its record and a marker; aborts add more
        while True:
            start = max(low, end - window)
            newest = self._newest_in(consumer, topic, start, end)
            if newest is not None or start == low:
                return newest
            window *= 4

    def _newest_in(self, consumer: Consumer, topic: str, start: int, end: int) -> int | None:
        tp = TopicPartition(topic, 0)
        consumer.assign([TopicPartition(topic, 0, start)])
        newest: int | None = None
        deadline = time.monotonic() + self.timeout_s
        while start < end and consumer.position([tp])[0].offset < end:
            if time.monotonic() > deadline:
                raise KafkaSinkError(
                    f"sink {self.transactional_id}: {topic} unreadable in {self.timeout_s} s "
                    "(a transaction still open in it holds its last stable offset)"
                )
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None and m.key() == self.transactional_id.encode():
                    newest = max(newest or 0, int(m.value()))
        return newest


def _release(producer: Producer) -> None:
    """Close ``producer``; one that is fenced or failed fatally refuses to end its
    transaction, and is released all the same when the last reference goes, here."""
    with suppress(KafkaException):
        producer.close()
