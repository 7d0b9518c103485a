"""CompletedCheckpointStore: ZooKeeper and standalone implementations, and the job registry."""

from sparkpoint.store.api import (
    DEFAULT_MAX_RETAINED,
    CheckpointDiscarder,
    CheckpointOrderError,
    CheckpointStoreError,
    CompletedCheckpointStore,
    DuplicateCheckpointError,
)
from sparkpoint.store.standalone import StandaloneCompletedCheckpointStore

__all__ = [
    "DEFAULT_MAX_RETAINED",
    "CheckpointDiscarder",
    "CheckpointOrderError",
    "CheckpointStoreError",
    "CompletedCheckpointStore",
    "DuplicateCheckpointError",
    "StandaloneCompletedCheckpointStore",
]
