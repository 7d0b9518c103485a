"""A rescale asked through the CLI and the REST API (a real replica, real ZooKeeper): bad
parallelisms and unknown jobs refused with clear errors; the request stored with the job
in ZooKeeper and carried by the driver run's heartbeats — by the next leader too, once the
first is gone — until the run reports it applied; `--wait` then says the epoch and the
checkpoint. Who may ask is covered with every mutating route in test_auth.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from sparkpoint.client import CoordinatorClient
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.cli.main import main
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.store import ZooKeeperJobRegistry
from tests.service.support import make_graph
from tests.support.waiting import wait_until

from .test_api_requests import JOB, _service, register


def rescale_cli(address: str, *args: str) -> Any:
    result = CliRunner().invoke(
        main, ["jobs", "rescale", "--job", JOB, *args, "--coordinator", address, "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def refused(address: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["jobs", "rescale", *args, "--coordinator", address])
    assert result.exit_code == 1, result.output
    return result.output


def heartbeat_rescale(http: httpx.Client, run: str) -> dict[str, Any] | None:
    reply = http.post(f"/v1/jobs/{JOB}/heartbeat", json={"after_seq": 0, "run_id": run})
    assert reply.status_code == 200, reply.text
    rescale: dict[str, Any] | None = reply.json()["rescale"]
    return rescale


def apply_requests(address: str, run: str, replaced: str) -> None:
    """What a pipeline driver does with the requests its heartbeats carry, until none is
    pending: registers its graph at the asked parallelism (a new run) and reports each
    applied (here after epoch 7, from checkpoint 5). Starts once request ``replaced``
    was replaced by another."""
    with httpx.Client(base_url=address, timeout=10) as http:
        wait_until(
            lambda: (heartbeat_rescale(http, run) or {}).get("request_id") not in ("", replaced),
            timeout=60,
            message="the second request reaches the driver",
        )
    with CoordinatorClient(address, retry_for_s=10) as client:
        while True:
            beat = client.heartbeat(JOB, 0, run_id=run)
            assert beat.rescale is not None
            if not beat.rescale.request_id:
                return
            if beat.rescale.parallelism != 2:
                graph = make_graph(JOB, beat.rescale.parallelism)
                run = client.register_job(graph, {"interval_ms": 3_600_000})["run_id"]
            client.rescale_applied(JOB, beat.rescale.request_id, 7, 5, run_id=run)


def test_a_rescale_request_survives_the_leader_and_says_when_it_took_effect(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str, observer: ZooKeeperConnection
) -> None:
    first = _service(tmp_path / "a", zk_server.connect_string, cluster_id)
    try:
        with httpx.Client(base_url=first.address, timeout=10) as http:
            run = register(http)  # the graph at parallelism 2, max parallelism 128
            assert heartbeat_rescale(http, run) == {"parallelism": 2, "request_id": ""}
        at = first.address
        assert "invalid_parallelism" in refused(at, "--job", JOB, "--parallelism", "0")
        above = refused(at, "--job", JOB, "--parallelism", "129")
        assert "between 1 and the job's max parallelism 128" in above
        assert "unknown_job" in refused(at, "--job", "nope", "--parallelism", "2")
        assert rescale_cli(at, "--parallelism", "2")["state"] == "unchanged"

        asked = rescale_cli(at, "--parallelism", "3")
        assert (asked["state"], asked["parallelism"]) == ("pending", 3)
        shown = CliRunner().invoke(main, ["jobs", "show", JOB, "--coordinator", at])
        assert f"rescale to 3 pending (request {asked['request_id']})" in shown.output
    finally:
        first.stop()

    # In ZooKeeper, with the job: the next leader has it.
    stored = ZooKeeperJobRegistry(observer, None).get(JOB)
    assert stored is not None and stored.rescale is not None
    assert (stored.rescale.request_id, stored.rescale.state) == (asked["request_id"], "pending")
    assert {op.parallelism for op in stored.graph.operators} == {2}

    second = _service(tmp_path / "b", zk_server.connect_string, cluster_id)
    try:
        with httpx.Client(base_url=second.address, timeout=10) as http:
            instruction = {"parallelism": 3, "request_id": asked["request_id"]}
            assert heartbeat_rescale(http, run) == instruction

            applier = threading.Thread(
                target=apply_requests, args=(second.address, run, asked["request_id"])
            )
            applier.start()
            # A second request while the first is pending replaces it; --wait waits for it.
            at = second.address
            applied = rescale_cli(at, "--parallelism", "3", "--wait", "--timeout", "60")
            applier.join(60)
    finally:
        second.stop()
    assert applied["state"] == "applied", applied
    assert (applied["parallelism"], applied["epoch"], applied["checkpoint_id"]) == (3, 7, 5)
    stored = ZooKeeperJobRegistry(observer, None).get(JOB)
    assert stored is not None and stored.rescale is not None
    assert stored.rescale.state == "applied"
    assert {op.parallelism for op in stored.graph.operators} == {3}
