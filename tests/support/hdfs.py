"""The suite's HDFS: a real NameNode and DataNodes from Hadoop's own jars (no stand-in).

``hdfs_cluster`` is one cluster for the whole session (3 DataNodes, replication 2, 1 MiB
blocks so that state files span blocks and DataNodes); tests isolate by directory under
``/tmp``. Fault tests that kill daemons start a cluster of their own with
:func:`own_cluster`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from sparkpoint.storage import filesystem_for

TEST_USER = "sparkpoint-test"
HDFS_OPTIONS: dict[str, Any] = {"user": TEST_USER, "timeout": 30}
TEST_BLOCK_SIZE = 1024 * 1024


@contextlib.contextmanager
def own_cluster(base_dir: Path, **kwargs: Any) -> Iterator[LocalHdfs]:
    cluster = LocalHdfs(base_dir, block_size=TEST_BLOCK_SIZE, heap_mb=192, **kwargs)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def hdfs_cluster(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[LocalHdfs]:
    with own_cluster(tmp_path_factory.mktemp("hdfs"), datanodes=3, replication=2) as cluster:
        report = cluster.status()
        reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        line = (
            f"HDFS for the tests: Apache Hadoop {report['version']}, NameNode "
            f"{cluster.rpc_uri} (WebHDFS {cluster.webhdfs_uri}), "
            f"{report['live_datanodes']} DataNodes, replication {cluster.replication}"
        )
        if reporter is not None:
            reporter.write_line(f"\n{line}")
        yield cluster


@pytest.fixture
def hdfs_dir(hdfs_cluster: LocalHdfs) -> Iterator[str]:
    """A fresh directory on the session's HDFS, owned by the test user."""
    directory = f"{hdfs_cluster.webhdfs_uri}/tmp/sparkpoint-tests/{uuid.uuid4().hex}"
    fs = filesystem_for(directory, **HDFS_OPTIONS)
    fs.mkdirs(directory)
    yield directory
    fs.delete(directory, recursive=True)
