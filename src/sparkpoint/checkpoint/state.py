"""Operator and subtask state of a checkpoint, and the completed checkpoint itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sparkpoint.checkpoint.errors import InvalidCheckpointValue
from sparkpoint.checkpoint.handles import (
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    OperatorStateHandle,
    own_sizes,
)
from sparkpoint.checkpoint.ids import validate_checkpoint_id, validate_job_id
from sparkpoint.checkpoint.keygroups import check_parallelism
from sparkpoint.checkpoint.status import CheckpointKind


@dataclass(frozen=True, slots=True)
class OperatorSubtaskState:
    """What one subtask of one operator acknowledged: its keyed and operator state."""

    keyed: tuple[KeyedStateHandle, ...] = ()
    operator: tuple[OperatorStateHandle, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "keyed", tuple(self.keyed))
        object.__setattr__(self, "operator", tuple(self.operator))

    @property
    def has_state(self) -> bool:
        return bool(self.keyed or self.operator)

    @property
    def state_size(self) -> int:
        """Bytes of state this subtask wrote, each counted once (its keyed and operator
        handles usually share one file)."""
        in_streams = [h for h in self.keyed if not isinstance(h, IncrementalKeyedStateHandle)]
        incremental = [h for h in self.keyed if isinstance(h, IncrementalKeyedStateHandle)]
        return sum(own_sizes((*in_streams, *self.operator))) + sum(
            h.state_size for h in incremental
        )

    @property
    def checkpointed_size(self) -> int:
        """Bytes of ``state_size`` this checkpoint wrote: all of it but the shared files
        of incremental state that an earlier checkpoint uploaded."""
        incremental = (h for h in self.keyed if isinstance(h, IncrementalKeyedStateHandle))
        return self.state_size - sum(h.reused_size for h in incremental)


@dataclass(frozen=True, slots=True)
class OperatorState:
    """All subtask states of one operator, identified by its stable uid."""

    operator_uid: str
    parallelism: int
    max_parallelism: int
    subtask_states: Mapping[int, OperatorSubtaskState]

    def __post_init__(self) -> None:
        object.__setattr__(self, "subtask_states", MappingProxyType(dict(self.subtask_states)))
        if not self.operator_uid:
            raise InvalidCheckpointValue("operator state with an empty uid")
        check_parallelism(self.parallelism, self.max_parallelism, self.operator_uid)
        for index in self.subtask_states:
            if isinstance(index, bool) or not isinstance(index, int):
                raise InvalidCheckpointValue(
                    f"operator {self.operator_uid}: subtask index {index!r} is not an integer"
                )
            if not 0 <= index < self.parallelism:
                raise InvalidCheckpointValue(
                    f"operator {self.operator_uid}: subtask index {index} is outside "
                    f"0..{self.parallelism - 1}"
                )
        for index, subtask in self.subtask_states.items():
            for handle in subtask.keyed:
                if handle.key_group_range.end >= self.max_parallelism:
                    raise InvalidCheckpointValue(
                        f"operator {self.operator_uid} subtask {index}: key groups "
                        f"{handle.key_group_range} exceed max parallelism {self.max_parallelism}"
                    )

    def __hash__(self) -> int:
        return hash((self.operator_uid, self.parallelism, self.max_parallelism))

    def __reduce__(self) -> tuple[type[OperatorState], tuple[object, ...]]:
        # A mappingproxy cannot be pickled; rebuild from a plain dict.
        return (
            type(self),
            (self.operator_uid, self.parallelism, self.max_parallelism, dict(self.subtask_states)),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OperatorState):
            return NotImplemented
        return (
            self.operator_uid == other.operator_uid
            and self.parallelism == other.parallelism
            and self.max_parallelism == other.max_parallelism
            and dict(self.subtask_states) == dict(other.subtask_states)
        )

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.subtask_states.values())

    @property
    def checkpointed_size(self) -> int:
        return sum(s.checkpointed_size for s in self.subtask_states.values())


@dataclass(frozen=True, slots=True)
class CompletedCheckpoint:
    """A checkpoint whose every acknowledgement arrived: the content of its `_metadata`."""

    job_id: str
    checkpoint_id: int
    kind: CheckpointKind
    trigger_timestamp_ms: int
    completion_timestamp_ms: int
    operator_states: Mapping[str, OperatorState]

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        validate_checkpoint_id(self.checkpoint_id)
        object.__setattr__(self, "operator_states", MappingProxyType(dict(self.operator_states)))
        for uid, state in self.operator_states.items():
            if uid != state.operator_uid:
                raise InvalidCheckpointValue(
                    f"operator state keyed by {uid!r} belongs to {state.operator_uid!r}"
                )
        if self.completion_timestamp_ms < self.trigger_timestamp_ms:
            raise InvalidCheckpointValue(
                f"checkpoint {self.checkpoint_id}: completed before it was triggered"
            )

    def __hash__(self) -> int:
        return hash((self.job_id, self.checkpoint_id))

    def __reduce__(self) -> tuple[type[CompletedCheckpoint], tuple[object, ...]]:
        # A mappingproxy cannot be pickled; rebuild from a plain dict.
        return (
            type(self),
            (
                self.job_id,
                self.checkpoint_id,
                self.kind,
                self.trigger_timestamp_ms,
                self.completion_timestamp_ms,
                dict(self.operator_states),
            ),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompletedCheckpoint):
            return NotImplemented
        return (
            self.job_id == other.job_id
            and self.checkpoint_id == other.checkpoint_id
            and self.kind == other.kind
            and self.trigger_timestamp_ms == other.trigger_timestamp_ms
            and self.completion_timestamp_ms == other.completion_timestamp_ms
            and dict(self.operator_states) == dict(other.operator_states)
        )

    @property
    def state_size(self) -> int:
        """Full size: every byte of state this checkpoint references (Flink's "full
        checkpoint data size")."""
        return sum(s.state_size for s in self.operator_states.values())

    @property
    def checkpointed_size(self) -> int:
        """Bytes this checkpoint wrote itself (Flink's "checkpointed data size"): the full
        size less the shared files it took over from earlier checkpoints."""
        return sum(s.checkpointed_size for s in self.operator_states.values())
