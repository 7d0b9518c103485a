"""CompletedCheckpointStore: ZooKeeper and standalone implementations, and the job registry."""

from sparkpoint.store.api import (
    DEFAULT_MAX_RETAINED,
    CheckpointDiscarder,
    CheckpointOrderError,
    CheckpointStoreError,
    CompletedCheckpointStore,
    DuplicateCheckpointError,
)
from sparkpoint.store.jobs import (
    JobRecord,
    JobRegistry,
    RescaleRequest,
    StandaloneJobRegistry,
    ZooKeeperJobRegistry,
)
from sparkpoint.store.standalone import StandaloneCompletedCheckpointStore
from sparkpoint.store.zookeeper import ZooKeeperCompletedCheckpointStore

__all__ = [
    "DEFAULT_MAX_RETAINED",
    "CheckpointDiscarder",
    "CheckpointOrderError",
    "CheckpointStoreError",
    "CompletedCheckpointStore",
    "DuplicateCheckpointError",
    "JobRecord",
    "JobRegistry",
    "RescaleRequest",
    "StandaloneCompletedCheckpointStore",
    "StandaloneJobRegistry",
    "ZooKeeperCompletedCheckpointStore",
    "ZooKeeperJobRegistry",
]
