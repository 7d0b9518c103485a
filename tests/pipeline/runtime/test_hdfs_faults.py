"""HDFS daemons die under a running pipeline: a real NameNode and DataNodes (a cluster of
the test's own), the HA coordinator on the real ZooKeeper, executors writing state
through WebHDFS. Each test looks at ZooKeeper and HDFS afterwards.

"While executors write" is made exact, not left to timing: the daemons are frozen
(SIGSTOP) before the snapshot, so each state-file upload stays in flight on an open
connection (the kernel accepts it); the test sees which daemon holds one in
``/proc/net/tcp``, kills a daemon with SIGKILL, and thaws the rest.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.config import load_config
from sparkpoint.ops.devcluster.hdfs import Daemon, LocalHdfs
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.pipeline import PipelineDriver
from sparkpoint.pipeline.channels.remote import RemoteChannel
from sparkpoint.service import Service, start_service
from sparkpoint.storage import CheckpointStorage, filesystem_for
from tests.pipeline import support
from tests.support.hdfs import own_cluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

JOB = "hdfs-faults"
MANUAL = 3_600_000


def in_flight(port: int) -> int:
    """Established TCP connections whose local port is ``port`` (server side)."""
    count = 0
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        with table.open() as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    count += 1
    return count


def _freeze(daemons: list[Daemon], sig: int) -> None:
    for daemon in daemons:
        assert daemon.pid is not None
        os.kill(daemon.pid, sig)


class Harness:
    """The cluster, the coordinator service and one in-process driver of the clicks job."""

    def __init__(
        self, hdfs: LocalHdfs, service: Service, spark: Any, out: Path, observer: Any
    ) -> None:
        self.hdfs = hdfs
        self.service = service
        self.observer = observer
        self.pipeline = support.pipeline(JOB, out, 2)
        self.channel = self._channel()
        self.driver = PipelineDriver(self.pipeline, spark, self.channel, inline_threshold=0)
        self.storage = CheckpointStorage(f"{hdfs.webhdfs_uri}/tmp/ckpt")

    def _channel(self) -> RemoteChannel:
        """A driver's channel to the service, checkpoints triggered by the test only."""
        address = self.service.address.split("://", 1)[1]
        return RemoteChannel([address], checkpoint_config={"interval_ms": MANUAL})

    def stored(self) -> list[int]:
        """The completed checkpoints as ZooKeeper holds them."""
        return support.retained(self.observer, JOB)

    def outcome(self, cid: int) -> str:
        """The checkpoint's status as the leader's REST API reports it (``COMPLETED``,
        ``FAILED``, ``IN_PROGRESS``): the coordinator's view, not the driver's, which
        hears an abort only at its next heartbeat."""
        url = f"{self.service.address}/v1/jobs/{JOB}/checkpoints/{cid}"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return str(json.load(reply)["status"])

    def settled(self, cid: int) -> str:
        return wait_until(
            lambda: (status := self.outcome(cid)) != "IN_PROGRESS" and status,
            timeout=180,
            message=f"checkpoint {cid} completes or aborts",
        )

    def checkpoint(self) -> int:
        cid = self.channel.trigger_checkpoint()
        self.driver.run(max_epochs=1)
        return cid

    def checkpoint_in_background(self, frozen: list[Daemon]) -> tuple[int, threading.Thread]:
        """Trigger a checkpoint (the coordinator makes its directory), freeze ``frozen``,
        then run the epoch that snapshots, in a thread."""
        cid = self.channel.trigger_checkpoint()
        _freeze(frozen, signal.SIGSTOP)
        thread = threading.Thread(target=self.driver.run, kwargs={"max_epochs": 1})
        thread.start()
        return cid, thread

    def assert_hdfs_matches_zookeeper(self, whole_from: int = 0) -> None:
        support.assert_hdfs_matches_zookeeper(self.storage, self.observer, JOB, whole_from)

    def finish(self) -> None:
        self.driver.run()
        self.driver.finish()
        self.driver.close()
        assert support.committed(self.pipeline) == support.expected()  # exactly once

    def restart_and_finish(self, spark: Any) -> None:
        """A crash of the driver, then a new one restoring from the latest completed
        checkpoint (its state files read back from HDFS) and running to the end."""
        latest = max(self.stored())
        self.driver.close()
        self.channel = self._channel()
        self.driver = PipelineDriver(self.pipeline, spark, self.channel, inline_threshold=0)
        restored = self.driver.start()
        assert restored is not None and restored.checkpoint_id == latest, restored
        self.finish()


@pytest.fixture
def harness_for(
    tmp_path: Path, spark: Any, zk_server: LocalZooKeeper, cluster_id: str, observer: Any
) -> Iterator[Any]:
    opened: list[tuple[Any, Service]] = []

    def make(replication: int) -> Harness:
        context = own_cluster(tmp_path / "hdfs", datanodes=3, replication=replication)
        hdfs = context.__enter__()
        config = load_config(
            overrides={
                "high-availability.zookeeper.quorum": zk_server.connect_string,
                "high-availability.cluster-id": cluster_id,
                "high-availability.zookeeper.client.session-timeout": "4 s",
                "rest.port": "0",
                "rest.auth.enabled": "false",
                "state.checkpoints.dir": f"{hdfs.webhdfs_uri}/tmp/ckpt",
                "state.checkpoints.num-retained": "10",
                # Ride out an HDFS fault: a declined checkpoint is retried at the next
                # one instead of failing the job.
                "execution.checkpointing.tolerable-failed-checkpoints": "3",
            },
            environ={},
        )
        service = start_service(config)
        opened.append((context, service))
        wait_until(service.replica.is_ready, timeout=30, message="replica leads")
        harness = Harness(hdfs, service, spark, tmp_path / "out", observer)
        assert harness.driver.start() is None  # a first start
        harness.driver.run(max_epochs=1)
        first = harness.checkpoint()
        wait_until(lambda: first in harness.stored(), timeout=60, message="checkpoint 1")
        return harness

    yield make
    for context, service in opened:
        service.stop()
        context.__exit__(None, None, None)


def test_datanode_killed_while_executors_write_state(harness_for: Any) -> None:
    """Replication 2 of 3: a DataNode in the write pipelines dies mid-snapshot; the
    writers go on with the others and the checkpoint completes. (Replication 1 is no
    fault tolerance: the blocks only the dead DataNode held are gone, so the state the
    pipeline re-reads from its last checkpoint is lost; see docs/storage.md.)"""
    h: Harness = harness_for(2)
    datanodes = list(h.hdfs.datanodes)
    cid, writing = h.checkpoint_in_background(datanodes)
    try:
        busy = wait_until(
            lambda: [d for d in datanodes if in_flight(d.http_port)],
            timeout=60,
            message="state uploads in flight to the frozen DataNodes",
        )
        # Not a DataNode a client streams to: one that only sits in write pipelines.
        victim = next(d for d in datanodes if d not in busy)
        h.hdfs.stop_daemon(victim, signal.SIGKILL)
    finally:
        _freeze([d for d in datanodes if d.pid is not None], signal.SIGCONT)
    writing.join(120)
    assert not writing.is_alive()
    assert cid in h.driver.status.acknowledged
    wait_until(lambda: cid in h.stored(), timeout=60, message=f"checkpoint {cid} completes")
    following = h.checkpoint()
    wait_until(lambda: following in h.stored(), timeout=60, message="the next one completes")
    h.assert_hdfs_matches_zookeeper()
    h.finish()


def test_datanode_with_the_only_replica_killed_while_executors_write_state(
    harness_for: Any, spark: Any
) -> None:
    """Replication 1: the DataNode an upload streams to dies mid-snapshot, so that file
    is lost with it. The checkpoint completes only if every upload was sent again whole
    to a live DataNode; otherwise the subtask declines and it aborts. Never half: listed
    in ZooKeeper exactly when its `_metadata` exists. The next one completes, and a new
    driver restores from it."""
    h: Harness = harness_for(1)
    datanodes = list(h.hdfs.datanodes)
    cid, writing = h.checkpoint_in_background(datanodes)
    try:
        busy = wait_until(
            lambda: [d for d in datanodes if in_flight(d.http_port)],
            timeout=60,
            message="state uploads in flight to the frozen DataNodes",
        )
        h.hdfs.stop_daemon(busy[0], signal.SIGKILL)
    finally:
        _freeze([d for d in datanodes if d.pid is not None], signal.SIGCONT)
    writing.join(180)
    assert not writing.is_alive()
    status = h.settled(cid)
    assert status in ("COMPLETED", "FAILED"), status
    assert (status == "COMPLETED") is (cid in h.stored())
    metadata = f"{h.storage.checkpoint_directory(JOB, cid)}/_metadata"
    assert (cid in h.stored()) is filesystem_for(metadata).exists(metadata)
    following = h.checkpoint()
    assert h.settled(following) == "COMPLETED"
    wait_until(lambda: following in h.stored(), timeout=60, message="the next one is stored")
    # Whole from the faulted checkpoint on; the earlier one's blocks that only the dead
    # DataNode held (its `_metadata`, maybe) are gone: that is what replication 1 means.
    h.assert_hdfs_matches_zookeeper(whole_from=cid)
    h.restart_and_finish(spark)


def test_namenode_killed_and_restarted_during_a_checkpoint(harness_for: Any, spark: Any) -> None:
    h: Harness = harness_for(2)
    namenode = h.hdfs.namenode
    cid, writing = h.checkpoint_in_background([namenode])
    try:
        wait_until(
            lambda: in_flight(namenode.http_port),
            timeout=60,
            message="state uploads in flight to the frozen NameNode",
        )
    finally:
        h.hdfs.stop_daemon(namenode, signal.SIGKILL)
    h.hdfs.start_daemon(namenode)  # the writers retry meanwhile, or give up and decline
    h.hdfs.wait_ready(timeout=120, datanodes=3)
    writing.join(180)
    assert not writing.is_alive()
    status = h.settled(cid)
    assert status in ("COMPLETED", "FAILED"), status
    # Completed or aborted, never half: listed in ZooKeeper exactly when its `_metadata` is.
    metadata = f"{h.storage.checkpoint_directory(JOB, cid)}/_metadata"
    assert (status == "COMPLETED") is (cid in h.stored())
    assert (cid in h.stored()) is filesystem_for(metadata).exists(metadata)
    following = h.checkpoint()
    assert h.settled(following) == "COMPLETED"
    wait_until(lambda: following in h.stored(), timeout=60, message="the next one is stored")
    h.assert_hdfs_matches_zookeeper()
    h.restart_and_finish(spark)
