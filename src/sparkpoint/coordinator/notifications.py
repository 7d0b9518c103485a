"""Notices for the pipeline driver: triggers, completions and aborts.

The service delivers them in its heartbeat replies. Each notice has a sequence number so a
driver whose reply was lost can ask again from its last seen number (``since``); ``drain``
is the simple take-everything form.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import CheckpointKind

#: Notices kept for re-delivery; older ones are dropped (a driver that far behind has
#: missed checkpoints that expired long ago anyway).
OUTBOX_CAPACITY = 1024


@dataclass(frozen=True, slots=True)
class TriggerNotice:
    """Snapshot at the next epoch boundary, writing state files into ``directory``;
    ``stop``: a savepoint that stops the job once it completes."""

    seq: int
    checkpoint_id: int
    kind: CheckpointKind
    timestamp_ms: int
    directory: str
    stop: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "trigger",
            "seq": self.seq,
            "checkpoint_id": self.checkpoint_id,
            "kind": self.kind.value,
            "timestamp_ms": self.timestamp_ms,
            "directory": self.directory,
            "stop": self.stop,
        }


@dataclass(frozen=True, slots=True)
class CompletionNotice:
    """Checkpoint N is durable in the store: sinks may commit, sources may ack."""

    seq: int
    checkpoint_id: int
    kind: CheckpointKind
    metadata_uri: str
    timestamp_ms: int = 0  # when it was triggered
    stop: bool = False  # a savepoint that stops the job

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "complete",
            "seq": self.seq,
            "checkpoint_id": self.checkpoint_id,
            "kind": self.kind.value,
            "metadata_uri": self.metadata_uri,
            "timestamp_ms": self.timestamp_ms,
            "stop": self.stop,
        }


@dataclass(frozen=True, slots=True)
class AbortNotice:
    """Checkpoint N will never complete; ``reason`` says why."""

    seq: int
    checkpoint_id: int
    reason: str
    kind: CheckpointKind = CheckpointKind.CHECKPOINT
    timestamp_ms: int = 0  # when it was triggered
    stop: bool = False  # a savepoint that would have stopped the job

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "abort",
            "seq": self.seq,
            "checkpoint_id": self.checkpoint_id,
            "reason": self.reason,
            "kind": self.kind.value,
            "timestamp_ms": self.timestamp_ms,
            "stop": self.stop,
        }


Notice = TriggerNotice | CompletionNotice | AbortNotice


class Outbox:
    """A bounded, thread-safe queue of notices with rising sequence numbers (from 1)."""

    def __init__(self, capacity: int = OUTBOX_CAPACITY) -> None:
        self._notices: deque[Notice] = deque(maxlen=capacity)
        self._seq = 0
        self._lock = threading.Lock()

    def trigger(
        self, checkpoint_id: int, kind: CheckpointKind, ts: int, directory: str, stop: bool = False
    ) -> None:
        with self._lock:
            self._seq += 1
            self._notices.append(TriggerNotice(self._seq, checkpoint_id, kind, ts, directory, stop))

    def complete(
        self,
        checkpoint_id: int,
        kind: CheckpointKind,
        metadata_uri: str,
        trigger_ms: int = 0,
        stop: bool = False,
    ) -> None:
        with self._lock:
            self._seq += 1
            self._notices.append(
                CompletionNotice(self._seq, checkpoint_id, kind, metadata_uri, trigger_ms, stop)
            )

    def abort(
        self,
        checkpoint_id: int,
        reason: str,
        kind: CheckpointKind = CheckpointKind.CHECKPOINT,
        trigger_ms: int = 0,
        stop: bool = False,
    ) -> None:
        with self._lock:
            self._seq += 1
            self._notices.append(
                AbortNotice(self._seq, checkpoint_id, reason, kind, trigger_ms, stop)
            )

    @property
    def last_seq(self) -> int:
        with self._lock:
            return self._seq

    def since(self, after_seq: int) -> list[Notice]:
        """Notices with a sequence number above ``after_seq``, oldest first; nothing removed."""
        with self._lock:
            return [n for n in self._notices if n.seq > after_seq]

    def drain(self) -> list[Notice]:
        """Every queued notice, oldest first, removing them."""
        with self._lock:
            notices = list(self._notices)
            self._notices.clear()
            return notices
