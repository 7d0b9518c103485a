from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.zookeeper import LocalZooKeeper

from .support import ReplicaProcess, spawn_replica


@pytest.fixture
def cluster_id() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def observer(zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[ZooKeeperConnection]:
    """A read-only look at the cluster's znodes."""
    conn = ZooKeeperConnection(
        ZooKeeperSettings(quorum=zk_server.connect_string, cluster_id=cluster_id)
    ).start()
    yield conn
    conn.close()


@pytest.fixture
def replicas(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[object]:
    """Factory of replica processes; all are killed at the end (logs kept in tmp_path)."""
    spawned: list[ReplicaProcess] = []

    def _spawn(name: str, **kw: object) -> ReplicaProcess:
        replica = spawn_replica(
            tmp_path / "replicas",
            name,
            quorum=zk_server.connect_string,
            cluster_id=cluster_id,
            checkpoints_dir=tmp_path / "checkpoints",
            **kw,  # type: ignore[arg-type]
        )
        spawned.append(replica)
        return replica

    yield _spawn
    for replica in spawned:
        replica.kill()
