"""Checkpoint statistics of one job, shaped like Flink's REST "checkpoints" overview.

``to_dict()`` gives counts, a summary (full and checkpointed size, end-to-end duration:
min, max, average over completed checkpoints), the latest completed / savepoint / failed /
restored, and the history of the last N checkpoints, newest first.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer, OperatorSubtaskState
from sparkpoint.coordinator.pending import CheckpointStatus, PendingCheckpoint


@dataclass(frozen=True, slots=True)
class Sizes:
    """Flink's two sizes of a checkpoint or of one subtask's part of it: ``state_size``,
    the full size (every byte of state it references), and ``checkpointed_size``, the
    bytes it wrote itself (less when incremental state reuses earlier files)."""

    state_size: int = 0
    checkpointed_size: int = 0

    @classmethod
    def of(cls, state: OperatorSubtaskState | PendingCheckpoint) -> Sizes:
        return cls(state.state_size, state.checkpointed_size)


@dataclass(slots=True)
class CheckpointRecord:
    """One checkpoint as the history shows it; updated in place while it runs."""

    checkpoint_id: int
    kind: CheckpointKind
    status: CheckpointStatus
    trigger_timestamp_ms: int
    num_subtasks: int
    num_acknowledged_subtasks: int = 0
    latest_ack_timestamp_ms: int | None = None
    state_size: int = 0
    checkpointed_size: int = 0
    completion_timestamp_ms: int | None = None
    failure_timestamp_ms: int | None = None
    failure_message: str | None = None
    external_path: str | None = None
    # (operator uid, subtask, ack time, sizes) per acknowledged subtask: the UI's
    # per-checkpoint detail; left out of the overview, which lists many checkpoints.
    subtask_acks: list[tuple[str, int, int, Sizes]] = field(default_factory=list)

    @property
    def end_to_end_duration_ms(self) -> int | None:
        end = self.completion_timestamp_ms or self.failure_timestamp_ms
        if end is None:
            end = self.latest_ack_timestamp_ms
        return None if end is None else end - self.trigger_timestamp_ms

    def to_dict(self, *, subtasks: bool = False) -> dict[str, Any]:
        out = {
            "id": self.checkpoint_id,
            "status": self.status.value,
            "is_savepoint": self.kind is CheckpointKind.SAVEPOINT,
            "trigger_timestamp": self.trigger_timestamp_ms,
            "latest_ack_timestamp": self.latest_ack_timestamp_ms,
            "completion_timestamp": self.completion_timestamp_ms,
            "failure_timestamp": self.failure_timestamp_ms,
            "failure_message": self.failure_message,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
            "end_to_end_duration": self.end_to_end_duration_ms,
            "num_subtasks": self.num_subtasks,
            "num_acknowledged_subtasks": self.num_acknowledged_subtasks,
            "external_path": self.external_path,
        }
        if subtasks:
            out["subtask_acks"] = [
                {
                    "operator": uid,
                    "subtask": i,
                    "ack_timestamp": at,
                    "state_size": sizes.state_size,
                    "checkpointed_size": sizes.checkpointed_size,
                }
                for uid, i, at, sizes in self.subtask_acks
            ]
        return out


@dataclass(frozen=True, slots=True)
class RestoredRecord:
    checkpoint_id: int
    restore_timestamp_ms: int
    is_savepoint: bool
    external_path: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.checkpoint_id,
            "restore_timestamp": self.restore_timestamp_ms,
            "is_savepoint": self.is_savepoint,
            "external_path": self.external_path,
        }


class _MinMaxAvg:
    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.min: int | None = None
        self.max: int | None = None

    def add(self, value: int) -> None:
        self.count += 1
        self.total += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def to_dict(self) -> dict[str, int | None]:
        avg = self.total // self.count if self.count else None
        return {"min": self.min, "max": self.max, "avg": avg}


class CheckpointStatsTracker:
    """Thread-safe; the coordinator reports to it, the REST layer reads ``to_dict()``."""

    def __init__(self, history_size: int = 10) -> None:
        self._lock = threading.Lock()
        self._history: deque[CheckpointRecord] = deque(maxlen=max(history_size, 0) or None)
        self._keep_history = history_size > 0
        self._active: dict[int, CheckpointRecord] = {}
        self._triggered = self._completed = self._failed = self._restored = 0
        self._size = _MinMaxAvg()
        self._checkpointed = _MinMaxAvg()
        self._duration = _MinMaxAvg()
        self._latest_completed: CheckpointRecord | None = None
        self._latest_savepoint: CheckpointRecord | None = None
        self._latest_failed: CheckpointRecord | None = None
        self._latest_restored: RestoredRecord | None = None

    def report_triggered(
        self, checkpoint_id: int, kind: CheckpointKind, trigger_ms: int, num_subtasks: int
    ) -> None:
        record = CheckpointRecord(
            checkpoint_id, kind, CheckpointStatus.IN_PROGRESS, trigger_ms, num_subtasks
        )
        with self._lock:
            self._triggered += 1
            self._active[checkpoint_id] = record
            if self._keep_history:
                self._history.appendleft(record)

    def report_acknowledged(
        self,
        checkpoint_id: int,
        acknowledged: int,
        sizes: Sizes,
        ack_ms: int,
        subtasks: Iterable[tuple[str, int, Sizes]] = (),
    ) -> None:
        """``sizes``: of every subtask acknowledged so far; ``subtasks``: (operator uid,
        subtask, sizes) of the ones acknowledged now."""
        with self._lock:
            record = self._active.get(checkpoint_id)
            if record is not None:
                record.subtask_acks.extend((uid, i, ack_ms, sz) for uid, i, sz in subtasks)
                record.num_acknowledged_subtasks = acknowledged
                record.state_size = sizes.state_size
                record.checkpointed_size = sizes.checkpointed_size
                record.latest_ack_timestamp_ms = ack_ms

    def report_completed(self, pointer: CheckpointPointer) -> None:
        with self._lock:
            record = self._active.pop(pointer.checkpoint_id, None)
            if record is None:
                return
            record.status = CheckpointStatus.COMPLETED
            record.completion_timestamp_ms = pointer.completion_timestamp_ms
            record.state_size = pointer.state_size
            record.checkpointed_size = pointer.checkpointed_size
            record.external_path = pointer.metadata_uri
            self._completed += 1
            self._size.add(pointer.state_size)
            self._checkpointed.add(pointer.checkpointed_size)
            self._duration.add(pointer.duration_ms)
            if pointer.is_savepoint:
                self._latest_savepoint = record
            else:
                self._latest_completed = record

    def report_failed(self, checkpoint_id: int, failure_ms: int, reason: str) -> None:
        with self._lock:
            record = self._active.pop(checkpoint_id, None)
            if record is None:
                return
            record.status = CheckpointStatus.FAILED
            record.failure_timestamp_ms = max(failure_ms, record.trigger_timestamp_ms)
            record.failure_message = reason
            self._failed += 1
            self._latest_failed = record

    def report_restored(self, pointer: CheckpointPointer, restore_ms: int) -> None:
        with self._lock:
            self._restored += 1
            self._latest_restored = RestoredRecord(
                pointer.checkpoint_id, restore_ms, pointer.is_savepoint, pointer.metadata_uri
            )

    def restored_since_completed(self) -> int | None:
        """The id last restored from, unless a newer checkpoint completed since."""
        with self._lock:
            restored, completed = self._latest_restored, self._latest_completed
            if restored is None:
                return None
            if completed is not None and completed.checkpoint_id > restored.checkpoint_id:
                return None
            return restored.checkpoint_id

    def history(self) -> list[CheckpointRecord]:
        """The last N checkpoints, newest first (copies)."""
        with self._lock:
            return [
                CheckpointRecord(**{**_fields(r), "subtask_acks": list(r.subtask_acks)})
                for r in self._history
            ]

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "counts": {
                    "restored": self._restored,
                    "total": self._triggered,
                    "in_progress": len(self._active),
                    "completed": self._completed,
                    "failed": self._failed,
                },
                "summary": {
                    "state_size": self._size.to_dict(),
                    "checkpointed_size": self._checkpointed.to_dict(),
                    "end_to_end_duration": self._duration.to_dict(),
                },
                "latest": {
                    "completed": _dict_or_none(self._latest_completed),
                    "savepoint": _dict_or_none(self._latest_savepoint),
                    "failed": _dict_or_none(self._latest_failed),
                    "restored": _dict_or_none(self._latest_restored),
                },
                "history": [r.to_dict() for r in self._history],
            }


def _fields(record: CheckpointRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in CheckpointRecord.__slots__}


def _dict_or_none(record: CheckpointRecord | RestoredRecord | None) -> dict[str, Any] | None:
    return None if record is None else record.to_dict()
