"""A leader cut off from ZooKeeper while the pipeline can still reach it.

The leading replica runs in a network namespace with two links to the host: one to
ZooKeeper, one that drivers use. Taking the ZooKeeper link down leaves the leader
reachable and with a session that would live another 30 s — only its lease can tell it
to stop, and only the lease can move leadership to the follower in time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import ZooKeeperConnection, read_leader
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.support.netns import NetnsHost
from tests.support.waiting import wait_until

from .support import Driver, ReplicaProcess, make_graph, spawn_replica
from .test_failover import JOB, assert_history_sound

SESSION = "30 s"


@pytest.fixture
def partitioned() -> Iterator[NetnsHost]:
    host = NetnsHost.create(subnet=11)
    yield host
    host.destroy()


@pytest.mark.slow
def test_cut_off_leader_stops_by_its_lease_while_the_pipeline_still_reaches_it(
    tmp_path: Path, partitioned: NetnsHost, cluster_id: str
) -> None:
    _, _, api_addr = partitioned.add_link(subnet=12)  # the drivers' way in; never cut
    zk = LocalZooKeeper(tmp_path / "zk", host=partitioned.host_addr, tick_time_ms=200).start()
    procs: list[ReplicaProcess] = []
    driver: Driver | None = None
    try:
        common = {
            "quorum": zk.connect_string,
            "cluster_id": cluster_id,
            "checkpoints_dir": tmp_path / "checkpoints",
            "session_timeout": SESSION,
        }
        inside = spawn_replica(
            tmp_path / "replicas", "inside", prefix=partitioned.prefix, host=api_addr,
            settings={"rest.bind-address": api_addr}, **common,
        )  # fmt: skip
        procs.append(inside)
        wait_until(lambda: inside.state() == "leader", timeout=60, message="inside leads")
        outside = spawn_replica(tmp_path / "replicas", "outside", **common)
        procs.append(outside)
        wait_until(lambda: outside.state() == "follower", timeout=60, message="outside follows")
        driver = Driver([inside.address, outside.address], make_graph(JOB)).start()
        wait_until(lambda: len(driver.completed) >= 2, timeout=30, message="2 checkpoints")

        partitioned.cut()  # ZooKeeper unreachable from inside; the drivers' link stays up
        # The cut-off leader stops acting by its own deadline: still reachable, it refuses.
        wait_until(
            lambda: httpx.post(f"{inside.address}/v1/jobs/{JOB}/heartbeat",
                               json={"after_seq": 0, "run_id": driver.run_id},
                               timeout=5).status_code in (307, 503),
            timeout=10,
            message="the cut-off leader stops acting",
        )  # fmt: skip
        # The follower takes over by lease, long before the 30 s session could expire, and
        # the driver follows it without registering again.
        wait_until(lambda: outside.state() == "leader", timeout=15, message="follower takes over")
        new_epoch = max(epoch for epoch, _ in driver.completed) + 1
        wait_until(
            lambda: any(e >= new_epoch for e, _ in driver.completed),
            timeout=30,
            message="checkpoints complete under the new leader",
        )
        assert driver.registrations == 1

        partitioned.restore()
        # Back on ZooKeeper with its session alive, its next renewal is fenced.
        wait_until(lambda: inside.state() == "follower", timeout=30, message="inside steps down")
        assert inside.metric("sparkpoint_fenced_writes_total") >= 1
        conn = ZooKeeperConnection(
            ZooKeeperSettings(quorum=zk.connect_string, cluster_id=cluster_id)
        ).start()
        try:
            info = read_leader(conn)
            assert info is not None and info.instance_id == "outside"
            assert_history_sound(driver, conn)
        finally:
            conn.close()
    finally:
        if driver is not None:
            driver.stop()
        for proc in procs:
            proc.kill()
        zk.stop()
