"""PendingCheckpoint: a triggered checkpoint collecting the acknowledgements it waits for."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    InvalidCheckpointValue,
    JobGraph,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.coordinator.errors import (
    CheckpointFinishedError,
    DuplicateAcknowledgeError,
    InvalidSubtaskStateError,
    UnexpectedSubtaskError,
)
from sparkpoint.coordinator.storage_api import CheckpointLocationLike

SubtaskKey = tuple[str, int]


class CheckpointStatus(enum.StrEnum):
    """Where a checkpoint is in its life (names after Flink's checkpoint stats)."""

    IN_PROGRESS = "IN_PROGRESS"  # waiting for acknowledgements
    FINALIZING = "FINALIZING"  # every ack is in; `_metadata` and the store are being written
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"  # declined, expired, aborted, or finalisation failed


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """One subtask's acknowledgement: its operator uid, subtask index and state."""

    operator_uid: str
    subtask: int
    state: OperatorSubtaskState


class PendingCheckpoint:
    """The acknowledgements a checkpoint still owes, and the states already received.

    Not thread-safe: the coordinator guards it with its lock. Validation
    (:meth:`check_acknowledgements`) is separate from mutation (:meth:`acknowledge`) so a
    batch is refused as a whole, leaving nothing half-applied.
    """

    def __init__(
        self,
        *,
        graph: JobGraph,
        checkpoint_id: int,
        kind: CheckpointKind,
        trigger_timestamp_ms: int,
        location: CheckpointLocationLike,
        stop_job: bool = False,
    ) -> None:
        self.graph = graph
        self.checkpoint_id = checkpoint_id
        self.kind = kind
        self.trigger_timestamp_ms = trigger_timestamp_ms
        self.location = location
        self.stop_job = stop_job
        self.status = CheckpointStatus.IN_PROGRESS
        self.last_ack_timestamp_ms: int | None = None
        self._waiting: set[SubtaskKey] = set(graph.acknowledging_subtasks)
        self._total = len(self._waiting)
        self._states: dict[SubtaskKey, OperatorSubtaskState] = {}

    @property
    def is_savepoint(self) -> bool:
        return self.kind is CheckpointKind.SAVEPOINT

    @property
    def total_subtasks(self) -> int:
        return self._total

    @property
    def acknowledged_subtasks(self) -> int:
        return len(self._states)

    @property
    def is_fully_acknowledged(self) -> bool:
        return not self._waiting

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self._states.values())

    @property
    def checkpointed_size(self) -> int:
        return sum(s.checkpointed_size for s in self._states.values())

    def subtask_states(self) -> tuple[OperatorSubtaskState, ...]:
        """The states acknowledged so far (what the checkpoint will reference)."""
        return tuple(self._states.values())

    def waiting_for(self) -> frozenset[SubtaskKey]:
        return frozenset(self._waiting)

    def check_subtask(self, operator_uid: str, subtask: int) -> None:
        """Raise unless this (operator, subtask) is one the checkpoint waits for or got."""
        key = (operator_uid, subtask)
        if key not in self._waiting and key not in self._states:
            raise UnexpectedSubtaskError(
                f"checkpoint {self.checkpoint_id} does not wait for operator "
                f"{operator_uid!r} subtask {subtask}",
                checkpoint_id=self.checkpoint_id,
            )

    def check_acknowledgements(self, acks: Iterable[Acknowledgement]) -> list[Acknowledgement]:
        """Validate a batch against this checkpoint without changing anything."""
        if self.status is not CheckpointStatus.IN_PROGRESS:
            raise CheckpointFinishedError(
                f"checkpoint {self.checkpoint_id} is {self.status.value}, it takes no more "
                "acknowledgements",
                checkpoint_id=self.checkpoint_id,
                status=self.status.value,
            )
        batch = list(acks)
        seen: set[SubtaskKey] = set()
        for ack in batch:
            key = (ack.operator_uid, ack.subtask)
            self.check_subtask(*key)
            if key in self._states or key in seen:
                raise DuplicateAcknowledgeError(
                    f"operator {ack.operator_uid!r} subtask {ack.subtask} already acknowledged "
                    f"checkpoint {self.checkpoint_id}",
                    checkpoint_id=self.checkpoint_id,
                )
            seen.add(key)
            self._check_state(ack)
        return batch

    def acknowledge(self, acks: Iterable[Acknowledgement], now_ms: int) -> None:
        """Record a batch already validated by :meth:`check_acknowledgements`."""
        for ack in acks:
            key = (ack.operator_uid, ack.subtask)
            self._waiting.discard(key)
            self._states[key] = ack.state
        self.last_ack_timestamp_ms = now_ms

    def to_completed(self, completion_timestamp_ms: int) -> CompletedCheckpoint:
        """The content of `_metadata`: every operator's subtask states, by uid."""
        by_operator: dict[str, dict[int, OperatorSubtaskState]] = {}
        for (uid, subtask), state in self._states.items():
            by_operator.setdefault(uid, {})[subtask] = state
        operator_states = {}
        for op in self.graph.operators:
            if op.uid in by_operator:
                operator_states[op.uid] = OperatorState(
                    op.uid, op.parallelism, op.max_parallelism, by_operator[op.uid]
                )
        return CompletedCheckpoint(
            job_id=self.graph.job_id,
            checkpoint_id=self.checkpoint_id,
            kind=self.kind,
            trigger_timestamp_ms=self.trigger_timestamp_ms,
            completion_timestamp_ms=max(completion_timestamp_ms, self.trigger_timestamp_ms),
            operator_states=operator_states,
        )

    def _check_state(self, ack: Acknowledgement) -> None:
        # Building the operator's state now runs the domain model's own checks, so a state
        # that could never be written into `_metadata` is refused at the door instead of
        # failing the whole checkpoint at finalisation.
        if not isinstance(ack.state, OperatorSubtaskState):
            raise InvalidSubtaskStateError(
                f"state of operator {ack.operator_uid!r} subtask {ack.subtask} is "
                f"{type(ack.state).__name__}, not OperatorSubtaskState",
                checkpoint_id=self.checkpoint_id,
            )
        op = self.graph.operator(ack.operator_uid)
        try:
            OperatorState(op.uid, op.parallelism, op.max_parallelism, {ack.subtask: ack.state})
        except InvalidCheckpointValue as exc:
            raise InvalidSubtaskStateError(
                f"checkpoint {self.checkpoint_id}: {exc}", checkpoint_id=self.checkpoint_id
            ) from exc
