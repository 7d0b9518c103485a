"""The message-acknowledging source base (Flink's ``MessageAcknowledgingSourceBase``).

A queue cannot be rewound to an offset, so exactly-once comes from the broker instead:
a message stays unacknowledged until the checkpoint whose state holds its effect is
complete. The source keeps the ids of the messages processed since the last snapshot;
at a snapshot they become ``pending[checkpoint id]`` and are written with the checkpoint
(operator state, so they survive a restore at any parallelism); when checkpoint N
completes, every pending entry ≤ N is acknowledged to the broker — never before. A
message the broker delivers again (after a crash, a broker restart or a lost ack) is
recognised by its id and dropped.

Where the consumer lives: on the driver. Spark may run a task twice or recompute a lost
partition, and a queue cannot be read "again" the way a file range can; so the driver
pulls each epoch's messages, and the epoch's ranges carry the decoded records to the
executors (:class:`BatchReader`), which makes a recomputed partition see the same
records. Acks, which must come from the connection that received the message, are then
sent by the same process that holds the completion notice. See docs/pipeline.md.
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.pipeline.sources.base import EpochRange

log = logging.getLogger(__name__)

#: Reasons a message goes to the dead-letter queue.
UNDECODABLE, MISSING_ID = "undecodable", "missing_id"


class BrokerUnavailable(RuntimeError):
    """The broker could not be reached; the operation is retried by a later redelivery."""


@dataclass(slots=True)
class Delivery:
    """One message as the broker handed it over. ``tag`` is the broker's opaque handle
    for acknowledging it (only valid on the connection that received it)."""

    message_id: str | None
    tag: Any
    body: bytes
    headers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BatchReader:
    """The records of one epoch, carried to the executors (picklable)."""

    batches: dict[str, tuple[Any, ...]]

    def read(self, split: EpochRange) -> Iterator[tuple[int, Any]]:
        records = self.batches[split.split]
        for position in range(split.start, split.end):
            yield position, records[position]


class MessageAcknowledgingSource(ABC):
    """Driver side of a queue source. Subclasses talk to the broker:
    :meth:`fetch`, :meth:`acknowledge`, :meth:`dead_letter`, :meth:`close`.

    ``deserialize(body)`` turns a message body into a record; when it raises, the
    message is a poison message and goes to the dead-letter queue (it is never dropped
    and never blocks the stream). ``at_least_once``: messages without an id are
    processed (with a random id, so a redelivery is processed again) instead of being
    dead-lettered. ``batch_size``: at most this many messages per epoch. ``splits``: the
    epoch's records are cut into this many ranges, read in parallel.
    ``max_pending_ids`` bounds the ids waiting for a completed checkpoint: when it is
    reached, nothing more is fetched until a checkpoint completes (backpressure, never
    unbounded memory). ``max_remembered_ids``: how many ids of messages whose checkpoint
    completed are kept to drop late redeliveries (the oldest are forgotten first).
    """

    #: Operator-state element keys (the driver writes ``offsets()`` as the state).
    _PENDING, _DONE = "pending", "done"

    def __init__(
        self,
        *,
        deserialize: Callable[[bytes], Any],
        name: str = "queue",
        batch_size: int = 5000,
        splits: int = 4,
        at_least_once: bool = False,
        max_remembered_ids: int = 50_000,
        max_pending_ids: int = 100_000,
    ) -> None:
        if batch_size < 1 or splits < 1 or max_remembered_ids < 0:
            raise ValueError("batch_size and splits must be ≥ 1, max_remembered_ids ≥ 0")
        self.deserialize = deserialize
        self.name = name
        self.batch_size = batch_size
        self.splits = splits
        self.at_least_once = at_least_once
        self.max_remembered_ids = max_remembered_ids
        self.max_pending_ids = max_pending_ids
        # id → broker tags, processed since the last snapshot (effect in no checkpoint yet)
        self._window: dict[str, list[Any]] = {}
        # checkpoint id → {id → tags}: in a checkpoint that has not completed yet
        self._pending: OrderedDict[int, dict[str, list[Any]]] = OrderedDict()
        # ids whose effect is in a completed (or the restored) checkpoint
        self._done: OrderedDict[str, None] = OrderedDict()
        self._batch: dict[str, tuple[Any, ...]] = {}
        self._epoch = 0
        self.duplicates = 0
        self.dead_lettered: dict[str, int] = {UNDECODABLE: 0, MISSING_ID: 0}
        self.acknowledged = 0

    # -- what a broker connector implements ------------------------------------------

    @abstractmethod
    def fetch(self, max_messages: int) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, without waiting long for more."""

    @abstractmethod
    def acknowledge(self, tags: list[Any]) -> None:
        """Acknowledge ``tags``; a tag of a connection that is gone is skipped (the broker
        delivers that message again, and its id drops it)."""

    @abstractmethod
    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move ``delivery`` to the dead-letter queue durably, then acknowledge it; raise
        :class:`BrokerUnavailable` when that cannot be done now."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release the broker connection."""

    # -- the Source protocol -----------------------------------------------------------

    @property
    def pending_ids(self) -> int:
        return len(self._window) + sum(len(ids) for ids in self._pending.values())

    def plan_epoch(self) -> list[EpochRange]:
        self._batch = {}
        records: list[Any] = []
        room = min(self.batch_size, self.max_pending_ids - self.pending_ids)
        for delivery in self.fetch(room) if room > 0 else ():
            record = self._admit(delivery)
            if record is not _SKIP:
                records.append(record)
        if not records:
            return []
        self._epoch += 1
        per_split = -(-len(records) // self.splits)
        ranges = []
        for n, start in enumerate(range(0, len(records), per_split)):
            split = f"{self.name}-{self._epoch:010d}-{n:03d}"
            self._batch[split] = tuple(records[start : start + per_split])
            ranges.append(EpochRange(split, 0, len(self._batch[split])))
        return ranges

    def _admit(self, delivery: Delivery) -> Any:
        message_id = delivery.message_id
        if message_id is None:
            if not self.at_least_once:
                log.error(
                    "source %s: a message without message id or correlation id; "
                    "dead-lettered (exactly-once needs an id; or choose at-least-once)",
                    self.name,
                )
                self._dead_letter(delivery, MISSING_ID)
                return _SKIP
            message_id = f"~{uuid.uuid4().hex}"
        if message_id in self._done:
            # Its effect is in a completed checkpoint: drop it for good.
            self.duplicates += 1
            del self._done[message_id]
            self.acknowledge([delivery.tag])
            return _SKIP
        seen = self._window.get(message_id)
        if seen is None:
            seen = next(
                (ids[message_id] for ids in self._pending.values() if message_id in ids), None
            )
        if seen is not None:
            # Delivered again before its checkpoint completed: ack it with that checkpoint.
            self.duplicates += 1
            seen.append(delivery.tag)
            return _SKIP
        try:
            record = self.deserialize(delivery.body)
        except Exception as exc:  # any failure to decode makes it a poison message
            log.warning("source %s: message %s undecodable (%s)", self.name, message_id, exc)
            self._dead_letter(delivery, UNDECODABLE)
            return _SKIP
        self._window[message_id] = [delivery.tag]
        return record

    def _dead_letter(self, delivery: Delivery, reason: str) -> None:
        from sparkpoint.metrics import SOURCE_DEAD_LETTERED

        try:
            self.dead_letter(delivery, reason)
        except BrokerUnavailable as exc:
            # Unacknowledged, so the broker delivers it again and it is moved then.
            log.warning("source %s: dead-lettering deferred: %s", self.name, exc)
            return
        self.dead_lettered[reason] += 1
        SOURCE_DEAD_LETTERED.labels(source=self.name, reason=reason).inc()

    def advance(self, ranges: list[EpochRange]) -> None:  # noqa: B027 - a no-op on purpose
        """Nothing to move: the ids of the epoch are already in the window."""

    def reader(self) -> BatchReader:
        return BatchReader(dict(self._batch))

    @property
    def exhausted(self) -> bool:
        return False  # a queue can always get more messages

    # -- checkpoints -------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> None:
        """The ids processed since the last snapshot belong to checkpoint ``checkpoint_id``."""
        self._pending[checkpoint_id] = self._window
        self._window = {}

    def offsets(self) -> dict[str, Any]:
        """The operator state: pending ids by checkpoint, and the remembered done ids
        (chunked, so the driver spreads them over the source's subtasks)."""
        state: dict[str, Any] = {}
        for cid, ids in self._pending.items():
            for n, chunk in enumerate(_chunks(list(ids), 1000)):
                state[f"{self._PENDING}-{cid:012d}-{n:06d}"] = chunk
        for n, chunk in enumerate(_chunks(list(self._done), 1000)):
            state[f"{self._DONE}-{n:06d}"] = chunk
        return state

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Acknowledge every message of every pending checkpoint ≤ ``checkpoint_id``."""
        tags: list[Any] = []
        for cid in [c for c in self._pending if c <= checkpoint_id]:
            for message_id, message_tags in self._pending.pop(cid).items():
                tags.extend(message_tags)
                self._remember(message_id)
        if tags:
            self.acknowledge(tags)
            self.acknowledged += len(tags)

    def _remember(self, message_id: str) -> None:
        self._done[message_id] = None
        while len(self._done) > self.max_remembered_ids:
            self._done.popitem(last=False)

    def restore(self, offsets: dict[str, Any]) -> None:
        """Every id in the restored checkpoint has its effect in that (completed)
        checkpoint's state: a redelivery of any of them is dropped."""
        self._window, self._pending, self._done = {}, OrderedDict(), OrderedDict()
        for key in sorted(offsets):
            for message_id in offsets[key]:
                self._remember(message_id)


_SKIP = object()


def _chunks(items: list[str], size: int) -> Iterator[tuple[str, ...]]:
    for start in range(0, len(items), size):
        yield tuple(items[start : start + size])
