"""High availability: the ZooKeeper client, leader election, fencing, leases.

The only package (with ``counter`` and ``store``) that touches kazoo; everything else sees
the types and exceptions exported here.
"""

from sparkpoint.ha.clusters import UnknownClusterError, cluster_ids, require_cluster
from sparkpoint.ha.connection import ConnectionState, ZooKeeperConnection
from sparkpoint.ha.election import ZooKeeperLeaderElection
from sparkpoint.ha.embedded import EmbeddedLeaderElection
from sparkpoint.ha.errors import (
    ConflictError,
    FencedError,
    HAError,
    NotConnectedError,
    PossiblyAppliedError,
)
from sparkpoint.ha.fencing import Fence, Op, ZooKeeperLeadership, read_epoch
from sparkpoint.ha.leader_info import (
    ContenderInfo,
    LeaderInfo,
    list_contenders,
    read_leader,
    watch_leader_info,
)
from sparkpoint.ha.leadership import (
    ContenderState,
    LeaderElection,
    Leadership,
    LeadershipListener,
)
from sparkpoint.ha.paths import ZkPaths

__all__ = [
    "ConflictError",
    "ConnectionState",
    "ContenderInfo",
    "ContenderState",
    "EmbeddedLeaderElection",
    "Fence",
    "FencedError",
    "HAError",
    "LeaderElection",
    "LeaderInfo",
    "Leadership",
    "LeadershipListener",
    "NotConnectedError",
    "Op",
    "PossiblyAppliedError",
    "UnknownClusterError",
    "ZkPaths",
    "ZooKeeperConnection",
    "ZooKeeperLeaderElection",
    "ZooKeeperLeadership",
    "cluster_ids",
    "list_contenders",
    "read_epoch",
    "read_leader",
    "require_cluster",
    "watch_leader_info",
]
