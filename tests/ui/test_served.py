"""`curl -s http://<replica>/ui/` answers the UI from the leader and from a follower, and
the UI's status endpoints answer on both."""

from __future__ import annotations

import httpx
import pytest

from tests.service.support import ReplicaProcess, wait_leader


@pytest.mark.slow
def test_every_replica_serves_the_ui(replicas) -> None:
    procs: list[ReplicaProcess] = [replicas(f"r{i}") for i in range(2)]
    leader = wait_leader(procs, timeout=90)
    follower = next(p for p in procs if p is not leader)
    for replica, role in ((leader, "leader"), (follower, "follower")):
        page = httpx.get(f"{replica.address}/ui/", timeout=10)
        assert page.status_code == 200, (role, page.status_code)
        assert page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="app.js">' in page.text
        for asset in ("app.js", "style.css", "vendor/uplot/uPlot.esm.js", "pages/cluster.js"):
            assert httpx.get(f"{replica.address}/ui/{asset}", timeout=10).status_code == 200
        bare = httpx.get(f"{replica.address}/ui", timeout=10)
        assert bare.status_code == 307 and bare.headers["location"] == "/ui/"
        me = httpx.get(f"{replica.address}/v1/ui/replica", timeout=10).json()
        assert me["role"] == role and me["zookeeper"] == "connected"
        cluster = httpx.get(f"{replica.address}/v1/ui/cluster", timeout=10).json()
        assert cluster["leader"]["instance_id"] == leader.name
        assert {r["instance_id"]: r["role"] for r in cluster["replicas"]} == {
            leader.name: "leader",
            follower.name: "follower",
        }


@pytest.mark.slow
def test_restore_preview_refuses_a_bad_parallelism_and_changes_nothing(replicas) -> None:
    from tests.service.support import Driver, make_graph
    from tests.support.waiting import wait_until

    procs = [replicas("r0")]
    leader = wait_leader(procs, timeout=90)
    driver = Driver([leader.address], make_graph("clicks")).start()
    try:
        wait_until(lambda: len(driver.completed) >= 1, timeout=60, message="a checkpoint")
        url = f"{leader.address}/v1/ui/jobs/clicks/restore-preview"
        before = httpx.get(f"{leader.address}/v1/jobs/clicks/checkpoints", timeout=10).json()
        bad = httpx.get(url, params={"parallelism": 129}, timeout=10)
        assert bad.status_code == 422
        assert "parallelism 129" in bad.json()["message"]
        assert "128" in bad.json()["message"]
        good = httpx.get(url, params={"parallelism": 3}, timeout=10).json()
        count = next(op for op in good["plan"]["operators"] if op["uid"] == "count")
        assert [s["key_groups"] for s in count["subtasks"]] == [[0, 42], [43, 85], [86, 127]]
        after = httpx.get(f"{leader.address}/v1/jobs/clicks/checkpoints", timeout=10).json()
        assert after["counts"]["restored"] == before["counts"]["restored"] == 0
        unknown = httpx.get(f"{leader.address}/v1/ui/jobs/nope/history", timeout=10)
        assert unknown.status_code == 404
    finally:
        driver.stop()
