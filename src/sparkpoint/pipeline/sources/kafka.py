"""A Kafka source (Flink's ``FlinkKafkaConsumerBase``), with confluent-kafka (librdkafka).

One split per topic partition, named ``<topic>:<partition>``. At each epoch's start the
driver fixes, per partition, the range from the next offset to the partition's last
stable offset (``read_committed``: no record of an open or aborted transaction is read),
capped at ``max_records_per_partition``. The executors read exactly that range, so a
recomputed partition re-reads the same records. Offsets are the operator state, one
element per partition (SPLIT_DISTRIBUTE): a restore at another parallelism hands the
partitions to the new subtasks as Flink does. When a checkpoint completes, its offsets are
committed to the consumer group — for lag tools only; a restore never reads them (unless
the job starts fresh with ``start="group"``).

Topics are named (``topics``) or matched (``pattern``, a regular expression); every
``discovery_interval_s`` the driver looks for new topics and partitions, and starts a new
partition at its earliest offset (it was created after the job started: all of it is
new). A record whose value ``deserialize`` cannot decode is produced to the dead-letter
topic (with its origin in the headers) and counted, never dropped: the driver creates the
topic before the first epoch, and a read whose poison records the broker did not all
acknowledge fails, so its epoch fails and the offsets do not move past them.

Clients live as long as what uses them: an executor's consumer (and dead-letter producer)
as long as the read of one range, the driver's admin client and group consumer until
:meth:`KafkaSource.close` (the driver calls it when the job's run ends).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from sparkpoint.pipeline.sources.base import EpochRange, OffsetSource
from sparkpoint.pipeline.sources.kafka_reader import (
    ORIGIN_HEADER,
    REASON_HEADER,
    UNDECODABLE,
    DeadLetterError,
    KafkaReader,
    json_value,
    parse_split,
    split_name,
)

log = logging.getLogger(__name__)

#: Where ``start`` may begin a fresh job (or a timestamp in epoch milliseconds).
EARLIEST, LATEST, GROUP = "earliest", "latest", "group"

__all__ = [
    "EARLIEST",
    "GROUP",
    "LATEST",
    "ORIGIN_HEADER",
    "REASON_HEADER",
    "UNDECODABLE",
    "DeadLetterError",
    "KafkaSource",
    "json_value",
]


@dataclass
class KafkaSource(OffsetSource):
    """Driver side. ``topics`` (a topic name, or a list of names) or ``pattern`` (a
    regular expression the whole name matches), one of them; ``start``: ``"earliest"``,
    ``"latest"``, ``"group"`` (the group's committed offsets, else earliest) or a
    timestamp in epoch milliseconds — only for a fresh job, a restore continues from the
    checkpoint. ``group_id`` is where completed offsets are committed (default
    ``sparkpoint-<name>``). ``bounded``: stop at the offsets that were the end when the
    job started (for tests and benchmarks). ``client_config``: extra librdkafka settings.
    ``dead_letter_topic`` (default ``<name>.dlq``) is created if missing;
    ``dead_letter_timeout_s``: how long a poison record may take to reach it before its
    epoch fails.
    """

    bootstrap: str
    topics: str | Sequence[str] = ()
    pattern: str | None = None
    start: str | int = EARLIEST
    group_id: str | None = None
    deserialize: Callable[[bytes | None], Any] = json_value
    dead_letter_topic: str | None = None
    max_records_per_partition: int = 50_000
    discovery_interval_s: float = 5.0
    bounded: bool = False
    name: str = "kafka"
    client_config: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 30.0
    dead_letter_timeout_s: float = 60.0
    _offsets: dict[str, int] = field(default_factory=dict, init=False)
    _bounds: dict[str, int] | None = field(default=None, init=False)
    _snapshots: dict[int, dict[str, int]] = field(default_factory=dict, init=False)
    _discovered_at: float | None = field(default=None, init=False)
    _restored: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.topics = _topic_names(self.topics)
        if self.pattern is not None and not isinstance(self.pattern, str):
            raise TypeError(f"pattern={self.pattern!r}: a regular expression (a str)")
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("a Kafka source needs topics or a pattern (exactly one of them)")
        if not (isinstance(self.start, int) or self.start in (EARLIEST, LATEST, GROUP)):
            raise ValueError(
                f"start={self.start!r}: use 'earliest', 'latest', 'group' or a timestamp (ms)"
            )
        if self.max_records_per_partition < 1:
            raise ValueError("max_records_per_partition must be at least 1")
        self._pattern = re.compile(self.pattern) if self.pattern else None
        self.group_id = self.group_id or f"sparkpoint-{self.name}"
        self.dead_letter_topic = self.dead_letter_topic or f"{self.name}.dlq"
        self._admin_client: AdminClient | None = None
        self._group_consumer: Consumer | None = None
        self._dead_letter_ready = False

    # -- clients (opened when first needed, closed by close()) -------------------------

    @property
    def _admin(self) -> AdminClient:
        if self._admin_client is None:
            self._admin_client = AdminClient(
                {**self.client_config, "bootstrap.servers": self.bootstrap}
            )
        return self._admin_client

    @property
    def _consumer(self) -> Consumer:
        """The group's consumer: it only commits offsets (never subscribes)."""
        if self._group_consumer is None:
            self._group_consumer = Consumer(
                {**self.client_config, "bootstrap.servers": self.bootstrap,
                 "group.id": self.group_id, "enable.auto.commit": False,
                 "isolation.level": "read_committed"}
            )  # fmt: skip
        return self._group_consumer

    def close(self) -> None:
        """Close the driver's clients (the job is gone); a later call reopens them."""
        consumer, self._group_consumer = self._group_consumer, None
        if consumer is not None:
            consumer.close()
        # An admin client has no close(): dropping the last reference destroys it, and
        # with it its connections.
        self._admin_client = None

    def _ensure_dead_letter_topic(self) -> None:
        """Create the dead-letter topic unless it exists: a broker without topic
        auto-creation would otherwise reject every poison record."""
        assert self.dead_letter_topic is not None
        topic = self.dead_letter_topic
        future = self._admin.create_topics(
            [NewTopic(topic, num_partitions=1)], request_timeout=self.timeout_s
        )[topic]
        try:
            future.result()  # bounded by request_timeout
            log.info("source %s: dead-letter topic %s created", self.name, topic)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                pass
            elif error.retriable() or error.code() in _TRANSIENT:
                raise  # plan_epoch tries again at its next call
            else:
                raise DeadLetterError(
                    f"source {self.name}: cannot create the dead-letter topic {topic!r} "
                    f"({error.str()}); create it beforehand, or allow this client to create it"
                ) from exc
        self._dead_letter_ready = True

    # -- discovery ---------------------------------------------------------------------

    def _matches(self, topic: str) -> bool:
        if self._pattern is not None:
            # Never its own dead-letter topic: its poison records would come round again.
            return (
                bool(self._pattern.fullmatch(topic))
                and not topic.startswith("__")
                and topic != self.dead_letter_topic
            )
        return topic in self.topics

    def _discover(self) -> None:
        if not self._dead_letter_ready:
            self._ensure_dead_letter_topic()
        metadata = self._admin.list_topics(timeout=self.timeout_s)
        found = [
            split_name(name, p)
            for name, topic in metadata.topics.items()
            if self._matches(name) and topic.error is None
            for p in topic.partitions
        ]
        new = [s for s in found if s not in self._offsets]
        fresh = self._discovered_at is None and not self._restored
        if new:
            starts = self._start_offsets(new, self.start if fresh else EARLIEST)
            self._offsets.update(starts)
            log.info("source %s: %d partitions added (%s)", self.name, len(new), ", ".join(new))
        if self.bounded and self._bounds is None:
            self._bounds = self._list_offsets(list(self._offsets), OffsetSpec.latest())
        self._discovered_at = time.monotonic()

    def _start_offsets(self, splits: list[str], start: str | int) -> dict[str, int]:
        if isinstance(start, int):
            return self._list_offsets(splits, OffsetSpec.for_timestamp(start), missing=LATEST)
        if start == GROUP:
            tps = [TopicPartition(*parse_split(s)) for s in splits]
            committed = self._consumer.committed(tps, timeout=self.timeout_s)
            known = {split_name(t.topic, t.partition): t.offset for t in committed if t.offset >= 0}
            rest = [s for s in splits if s not in known]
            return {**known, **self._list_offsets(rest, OffsetSpec.earliest())}
        spec = OffsetSpec.earliest() if start == EARLIEST else OffsetSpec.latest()
        return self._list_offsets(splits, spec)

    def _list_offsets(
        self, splits: list[str], spec: OffsetSpec, *, missing: str = EARLIEST
    ) -> dict[str, int]:
        if not splits:
            return {}
        request = {TopicPartition(*parse_split(s)): spec for s in splits}
        futures = self._admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self.timeout_s
        )
        out = {split_name(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        unresolved = [s for s, o in out.items() if o < 0]  # no record at or after a timestamp
        if unresolved:
            out.update(self._start_offsets(unresolved, missing))
        return out

    # -- the Source protocol -----------------------------------------------------------

    def restore(self, offsets: dict[str, int]) -> None:
        self._offsets = {s: int(o) for s, o in offsets.items()}
        self._restored = True

    def plan_epoch(self) -> list[EpochRange]:
        try:
            return self._plan()
        except KafkaException as exc:
            # A broker restarting or a leader moving: no epoch now, the next call tries again.
            log.warning("source %s: cannot plan an epoch now (%s)", self.name, exc)
            return []

    def _plan(self) -> list[EpochRange]:
        due = self._discovered_at is None or (
            not self.bounded and time.monotonic() - self._discovered_at >= self.discovery_interval_s
        )
        if due:
            self._discover()
        if not self._offsets:
            return []
        splits = sorted(self._offsets)
        earliest = self._list_offsets(splits, OffsetSpec.earliest())
        ends = self._bounds if self._bounds is not None else {}
        stable = self._list_offsets(splits, OffsetSpec.latest())
        ranges = []
        for split in splits:
            start = self._offsets[split]
            if start < earliest[split]:
                log.warning(
                    "source %s: %s offsets %d..%d were deleted by retention; skipped",
                    self.name, split, start, earliest[split],
                )  # fmt: skip
                start = self._offsets[split] = earliest[split]
            end = min(stable[split], ends.get(split, stable[split]))
            end = min(end, start + self.max_records_per_partition)
            if end > start:
                ranges.append(EpochRange(split, start, end))
        return ranges

    @property
    def exhausted(self) -> bool:
        if not self.bounded or self._bounds is None:
            return False
        return all(self._offsets.get(s, 0) >= end for s, end in self._bounds.items())

    def reader(self) -> KafkaReader:
        assert self.dead_letter_topic is not None
        return KafkaReader(
            self.bootstrap,
            self.name,
            self.deserialize,
            self.dead_letter_topic,
            tuple(sorted(self.client_config.items())),
            dead_letter_timeout_s=self.dead_letter_timeout_s,
        )

    # -- checkpoints -------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> None:
        self._snapshots[checkpoint_id] = dict(self._offsets)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Commit the completed checkpoint's offsets to the group, for lag tools only."""
        done = [c for c in self._snapshots if c <= checkpoint_id]
        if not done:
            return
        offsets = self._snapshots[max(done)]
        for c in done:
            del self._snapshots[c]
        tps = [TopicPartition(*parse_split(s), o) for s, o in sorted(offsets.items())]
        try:
            self._consumer.commit(offsets=tps, asynchronous=True)
        except KafkaException as exc:  # lag tools see it at the next completion instead
            log.warning("source %s: committing offsets to the group failed: %s", self.name, exc)


def _topic_names(topics: Any) -> tuple[str, ...]:
    """``topics`` as a tuple of names: one str is one topic (never its characters)."""
    if isinstance(topics, str):
        return (topics,) if topics else ()
    if not isinstance(topics, Iterable) or isinstance(topics, bytes | bytearray | Mapping):
        raise TypeError(
            f"topics={topics!r}: a topic name (str) or a list of topic names, "
            f"not {type(topics).__name__}"
        )
    names = tuple(topics)
    bad = [t for t in names if not isinstance(t, str) or not t]
    if bad:
        raise TypeError(f"topics={topics!r}: {bad[0]!r} is not a topic name (a non-empty str)")
    return names


#: Errors of a broker that is starting, moving a controller or timing out.
_TRANSIENT = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_CONTROLLER,
}
