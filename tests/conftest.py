"""Shared fixtures: real ZooKeeper servers started from real jars, never mocks."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.service.support import ReplicaProcess, spawn_replica
from tests.support.zk import settings_for

# The real HDFS fixtures (hdfs_cluster, hdfs_dir), for every package of the suite; and the
# check that no process of the session is left a client of a server a fixture stopped.
pytest_plugins = [
    "tests.support.hdfs",
    "tests.support.leftover_clients",
    "tests.support.store_servers",
    "tests.support.quick_jvms",
]

# A short tick lets tests use session timeouts of a second or two (the server accepts
# 2..20 ticks unless told otherwise; the launcher widens the upper bound).
TEST_TICK_MS = 200


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """One standalone ZooKeeper for the whole session; tests isolate by cluster id."""
    server = LocalZooKeeper(tmp_path_factory.mktemp("zk"), servers=1, tick_time_ms=TEST_TICK_MS)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_ensemble(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    """A fresh 3-server ensemble (tests kill its servers, so it is never shared)."""
    ensemble = LocalZooKeeper(tmp_path / "ensemble", servers=3, tick_time_ms=TEST_TICK_MS)
    ensemble.start()
    yield ensemble
    ensemble.stop()


@pytest.fixture
def zk_settings(zk_server: LocalZooKeeper) -> ZooKeeperSettings:
    return settings_for(zk_server.connect_string)


@pytest.fixture
def zk_conn(zk_settings: ZooKeeperSettings) -> Iterator[ZooKeeperConnection]:
    conn = ZooKeeperConnection(zk_settings).start()
    yield conn
    conn.close()


@pytest.fixture
def connect(zk_settings: ZooKeeperSettings) -> Iterator[object]:
    """Factory for more connections to the same cluster (one per simulated replica)."""
    opened: list[ZooKeeperConnection] = []

    def _connect(settings: ZooKeeperSettings | None = None) -> ZooKeeperConnection:
        conn = ZooKeeperConnection(settings or zk_settings).start()
        opened.append(conn)
        return conn

    yield _connect
    for conn in opened:
        conn.close()


@pytest.fixture(autouse=True)
def _quiet_kazoo() -> None:
    logging.getLogger("kazoo.client").setLevel(logging.WARNING)


@pytest.fixture
def cluster_id() -> str:
    """A fresh cluster id: tests sharing the session's ZooKeeper never see each other."""
    return f"c-{uuid.uuid4().hex[:10]}"


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
    """Factory of coordinator replica processes (`sparkpoint coordinator run`) of the
    cluster; all are killed at the end (logs kept in tmp_path)."""
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
