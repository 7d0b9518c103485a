"""CheckpointIDCounter: ZooKeeper and standalone implementations."""

from sparkpoint.counter.api import INITIAL_CHECKPOINT_ID, CheckpointIDCounter
from sparkpoint.counter.standalone import StandaloneCheckpointIDCounter
from sparkpoint.counter.zookeeper import ZooKeeperCheckpointIDCounter

__all__ = [
    "INITIAL_CHECKPOINT_ID",
    "CheckpointIDCounter",
    "StandaloneCheckpointIDCounter",
    "ZooKeeperCheckpointIDCounter",
]
