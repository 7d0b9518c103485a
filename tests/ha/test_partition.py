"""A leader cut off from ZooKeeper by a real network partition (network namespaces)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.ha.test_leases import RENEW, SESSION, TAKEOVER, check_history, issues_more
from tests.support.netns import NetnsHost
from tests.support.processes import ContenderProcess, spawn_contender
from tests.support.waiting import wait_until


@pytest.fixture
def partitioned_host() -> Iterator[NetnsHost]:
    host = NetnsHost.create(subnet=7)
    yield host
    host.destroy()


@pytest.fixture
def zk_on_veth(tmp_path: Path, partitioned_host: NetnsHost) -> Iterator[LocalZooKeeper]:
    """ZooKeeper listening on the host end of the veth, reachable from both sides."""
    zk = LocalZooKeeper(tmp_path / "zk", host=partitioned_host.host_addr, tick_time_ms=200)
    zk.start()
    yield zk
    zk.stop()


@pytest.mark.slow
def test_cut_off_leader_stops_by_its_own_deadline_and_a_follower_takes_over(
    tmp_path: Path, partitioned_host: NetnsHost, zk_on_veth: LocalZooKeeper
) -> None:
    options = {
        "quorum": zk_on_veth.connect_string,
        "cluster_id": f"n-{uuid.uuid4().hex[:8]}",
        "session_timeout": SESSION,
        "renew_interval": RENEW,
        "takeover_timeout": TAKEOVER,
        "job": "cut-job",
    }
    procs: list[ContenderProcess] = []
    try:
        cut_off = spawn_contender(tmp_path, "inside", prefix=partitioned_host.prefix, **options)
        procs.append(cut_off)
        wait_until(lambda: cut_off.status().get("can_act"), timeout=30, message="inside leads")
        outside = spawn_contender(tmp_path, "outside", **options)
        procs.append(outside)
        wait_until(lambda: outside.status().get("state") == "follower", timeout=30,
                   message="outside follows")  # fmt: skip
        issues_more(cut_off)

        partitioned_host.cut()
        # By its own clock, the cut-off leader stops acting before anyone may take over...
        wait_until(lambda: cut_off.status().get("can_act") is False, timeout=TAKEOVER + 2,
                   message="cut-off leader stops acting")  # fmt: skip
        # ...and a follower takes over long before the 30 s session could expire.
        wait_until(lambda: outside.status().get("can_act"), timeout=SESSION / 3,
                   message="follower takes over")  # fmt: skip
        issues_more(outside)
        issued_inside = cut_off.issued()

        partitioned_host.restore()
        # Back on the network with its session alive, its renewal is fenced: it steps down.
        wait_until(lambda: cut_off.status().get("state") == "follower"
                   and cut_off.status().get("demotions"), timeout=30,
                   message="cut-off leader steps down")  # fmt: skip
        assert cut_off.status()["demotions"][-1].startswith("fenced")
        assert cut_off.issued() == issued_inside
        issues_more(outside)
        check_history(procs)
    finally:
        for proc in procs:
            proc.kill()
