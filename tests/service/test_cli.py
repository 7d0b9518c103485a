"""`sparkpoint leader | jobs | checkpoints | savepoints` against a real replica, and from
ZooKeeper and storage alone once no coordinator answers."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.cli.main import main
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, free_port

from .test_api_requests import ALL, JOB, _service, ack_body, register


def cli(*args: str) -> object:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output) if "--json" in args else result.output


def test_status_commands_via_coordinator_then_zookeeper(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str
) -> None:
    import httpx

    service = _service(tmp_path, zk_server.connect_string, cluster_id)
    zk = ["--zookeeper", zk_server.connect_string, "--cluster-id", cluster_id]
    try:
        with httpx.Client(base_url=service.address, timeout=10) as http:
            run = register(http)
            cid = int(cli("checkpoints", "trigger", JOB, "--coordinator", service.address,
                          "--json")["checkpoint_id"])  # fmt: skip
            http.post(f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=ack_body(run, *ALL))
        leader = cli("leader", *zk, "--json")
        assert leader["leader"]["address"] == service.address
        jobs = cli("jobs", "list", *zk, "--json")  # the leader, found through ZooKeeper
        assert [j["job_id"] for j in jobs] == [JOB] and jobs[0]["status"] == "RUNNING"
        overview = cli("checkpoints", "list", JOB, "--coordinator", service.address, "--json")
        assert overview["source"] == "leader" and overview["counts"]["completed"] == 1
        savepoint = cli(
            "savepoints", "trigger", JOB, "--target", str(tmp_path / "savepoints" / "sp"),
            "--coordinator", service.address, "--json",
        )  # fmt: skip
        assert savepoint["checkpoint_id"] > cid
        assert "RUNNING" in cli("jobs", "show", JOB, "--coordinator", service.address)
        at = ["--coordinator", service.address]
        latest = cli("checkpoints", "show", "--job", JOB, *at, "--json")  # its latest
        assert latest["id"] == cid
        inspected = cli("metadata", "inspect", "--job", JOB, *at, "--json")
        assert inspected["checkpoint_id"] == cid
        plan = cli("restore", "plan", "--job", JOB, *at, "-p", "3", "--json")
        assert plan["checkpoint_id"] == cid
    finally:
        service.stop()

    # No coordinator any more: the same answers from ZooKeeper and storage.
    assert cli("leader", *zk, "--json")["leader"] is None
    overview = cli("checkpoints", "list", JOB, *zk, "--json")
    assert overview["source"] == "zookeeper"
    assert [p["checkpoint_id"] for p in overview["retained"]] == [cid]
    detail = cli("checkpoints", "show", JOB, str(cid), *zk, "--json")
    assert detail["metadata"]["checkpoint_id"] == cid
    assert JOB in cli("jobs", "list", *zk)
    listing = cli("checkpoints", "list", JOB, *zk)  # not a terminal: no path is cut
    assert str(cid) in listing and overview["retained"][0]["metadata_uri"] in listing
    refused = CliRunner().invoke(main, ["checkpoints", "trigger", JOB, *zk])
    assert refused.exit_code != 0 and "leader" in refused.output
    by_job = cli("checkpoints", "show", "--job", JOB, *zk, "--json")
    assert by_job["id"] == cid


def test_errors_say_where_to_point_the_cli(zk_server: LocalZooKeeper, cluster_id: str) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    refused = CliRunner().invoke(main, ["leader", "--coordinator", nobody])
    assert refused.exit_code == 1
    for hint in ("--coordinator", "SPARKPOINT_COORDINATOR", "--zookeeper", "--cluster-id",
                 "SPARKPOINT_HIGH_AVAILABILITY_ZOOKEEPER_QUORUM"):  # fmt: skip
        assert hint in refused.output, refused.output
    # A cluster id that is not there: said, with the ones that are.
    with ZooKeeperConnection(ZooKeeperSettings(quorum=zk_server.connect_string,
                                               cluster_id=cluster_id)) as conn:  # fmt: skip
        conn.client.ensure_path(conn.paths.jobs)
    unknown = CliRunner().invoke(
        main, ["jobs", "list", "--zookeeper", zk_server.connect_string, "--cluster-id", "nope"]
    )
    assert unknown.exit_code == 1
    assert "no cluster 'nope'" in unknown.output and cluster_id in unknown.output
