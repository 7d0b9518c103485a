"""`curl -s http://<replica>/ui/` answers the UI from the leader and from a follower, and
the UI's read-only endpoints answer on both, changing nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.service.support import Driver, ReplicaProcess, make_graph, wait_follower, wait_leader
from tests.support.waiting import wait_until

JOB = "clicks"


@pytest.mark.slow
def test_leader_and_follower_serve_the_ui_and_its_endpoints(replicas) -> None:
    procs: list[ReplicaProcess] = [replicas(f"r{i}") for i in range(2)]
    leader = wait_leader(procs, timeout=90)
    follower = wait_follower(procs, leader, timeout=90)
    driver = Driver([p.address for p in procs], make_graph(JOB)).start()
    try:
        wait_until(lambda: len(driver.completed) >= 1, timeout=90, message="a checkpoint")
        for replica, role in ((leader, "leader"), (follower, "follower")):
            page = httpx.get(f"{replica.address}/ui/", timeout=10)
            assert page.status_code == 200, (role, page.status_code)
            assert page.headers["content-type"].startswith("text/html")
            assert '<script type="module" src="app.js">' in page.text
            for asset in ("app.js", "style.css", "pages/cluster.js", "vendor/uplot/uPlot.esm.js"):
                assert httpx.get(f"{replica.address}/ui/{asset}", timeout=10).status_code == 200
            bare = httpx.get(f"{replica.address}/ui", timeout=10)
            assert bare.status_code == 307 and bare.headers["location"].endswith("/ui/")

            def ui(path: str, base: str = replica.address, **params: object) -> httpx.Response:
                return httpx.get(f"{base}/v1/ui/{path}", params=params, timeout=10)

            me = ui("replica").json()
            assert (me["role"], me["zookeeper"]) == (role, "connected")
            cluster = ui("cluster").json()
            assert cluster["leader"]["instance_id"] == leader.name
            roles = {r["instance_id"]: r["role"] for r in cluster["replicas"]}
            assert roles == {leader.name: "leader", follower.name: "follower"}

            (job,) = ui("jobs").json()["jobs"]
            assert job["driver_run"], job  # the run the registration issued
            history = ui(f"jobs/{JOB}/history", limit=1).json()
            assert history["total"] >= 1 and len(history["page"]) == 1
            assert history["source"] == ("leader" if role == "leader" else "zookeeper")

            bad = ui(f"jobs/{JOB}/restore-preview", parallelism=129)
            assert bad.status_code == 422, bad.text
            assert "parallelism 129" in bad.json()["message"]
            assert "1..128" in bad.json()["message"]
            plan = ui(f"jobs/{JOB}/restore-preview", parallelism=3).json()["plan"]
            count = next(op for op in plan["operators"] if op["uid"] == "count")
            assert [s["key_groups"] for s in count["subtasks"]] == [[0, 42], [43, 85], [86, 127]]

            assert ui("jobs/nope/history").status_code == 404
            assert ui(f"jobs/{JOB}/checkpoints/999999/verify").status_code == 404
        # A preview is not a restore: the leader recorded none.
        counts = httpx.get(f"{leader.address}/v1/jobs/{JOB}/checkpoints", timeout=10).json()
        assert counts["counts"]["restored"] == 0
    finally:
        driver.stop()
