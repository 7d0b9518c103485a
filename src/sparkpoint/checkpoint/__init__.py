"""The checkpoint domain model: ids, pointers, key-group ranges, state handles, states.

Pure values with no I/O, importing nothing else from sparkpoint.
"""

from sparkpoint.checkpoint.errors import InvalidCheckpointValue
from sparkpoint.checkpoint.graph import JobGraph, OperatorSpec
from sparkpoint.checkpoint.handles import (
    DistributionMode,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    KeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    StateMetaInfo,
    StoreFile,
    StreamStateHandle,
)
from sparkpoint.checkpoint.ids import (
    CHECKPOINT_ID_WIDTH,
    MAX_CHECKPOINT_ID,
    format_checkpoint_id,
    parse_checkpoint_id,
    validate_checkpoint_id,
    validate_job_id,
    validate_operator_uid,
)
from sparkpoint.checkpoint.keygroups import UPPER_BOUND_MAX_PARALLELISM, KeyGroupRange
from sparkpoint.checkpoint.pointer import CheckpointPointer
from sparkpoint.checkpoint.state import CompletedCheckpoint, OperatorState, OperatorSubtaskState
from sparkpoint.checkpoint.status import CheckpointKind, JobStatus

__all__ = [
    "CHECKPOINT_ID_WIDTH",
    "MAX_CHECKPOINT_ID",
    "UPPER_BOUND_MAX_PARALLELISM",
    "CheckpointKind",
    "CheckpointPointer",
    "CompletedCheckpoint",
    "DistributionMode",
    "FileStateHandle",
    "IncrementalKeyedStateHandle",
    "InlineStateHandle",
    "InvalidCheckpointValue",
    "JobGraph",
    "JobStatus",
    "KeyGroupRange",
    "KeyGroupsStateHandle",
    "KeyedStateHandle",
    "OperatorSpec",
    "OperatorState",
    "OperatorStateHandle",
    "OperatorSubtaskState",
    "StateMetaInfo",
    "StoreFile",
    "StreamStateHandle",
    "format_checkpoint_id",
    "parse_checkpoint_id",
    "validate_checkpoint_id",
    "validate_job_id",
    "validate_operator_uid",
]
