"""Driver run ids on a real leader (real ZooKeeper, real HTTP): two live drivers of one
job, the older still calling after the newer registered — every call of the older is
refused with 409 naming both runs and changes nothing; no checkpoint ever completes with
an acknowledgement of the older. The current run is kept in ZooKeeper, so the next leader
refuses the older run too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sparkpoint.checkpoint import OperatorSubtaskState
from sparkpoint.client import CoordinatorClient, Superseded
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.service import Service
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.coordinator.support import keyed_state
from tests.service.support import make_graph
from tests.service.test_api_requests import JOB, _service, snapshot

CONFIG = {"interval_ms": 3_600_000}


@pytest.fixture
def service(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[Service]:
    svc = _service(tmp_path, zk_server.connect_string, cluster_id)
    yield svc
    svc.stop()


def _acks(graph) -> list[tuple[str, int, OperatorSubtaskState]]:
    return [
        (op.uid, i, keyed_state(i, op.parallelism) if op.keyed else OperatorSubtaskState())
        for op in graph.operators
        for i in range(op.parallelism)
    ]


def _refused(call, old_run: str, new_run: str) -> None:
    with pytest.raises(Superseded) as refused:
        call()
    assert refused.value.status == 409 and refused.value.code == "run_superseded"
    assert old_run in refused.value.message and new_run in refused.value.message


def test_a_superseded_run_is_refused_and_never_completes_a_checkpoint(
    service, observer, tmp_path: Path
) -> None:
    graph = make_graph(JOB)
    acks = _acks(graph)
    with (
        CoordinatorClient(service.address, retry_for_s=10) as older,
        CoordinatorClient(service.address, retry_for_s=10) as newer,
    ):
        old_run = older.register_job(graph, CONFIG)["run_id"]
        older.restore_plan(JOB, graph)
        first = older.trigger_checkpoint(JOB)
        assert older.acknowledge(JOB, first, acks[:1])["status"] == "pending"

        # The older driver is cut off; a cluster manager starts a new run of the job.
        new_run = newer.register_job(graph, CONFIG)["run_id"]
        assert new_run != old_run
        newer.restore_plan(JOB, graph)
        second = newer.trigger_checkpoint(JOB)
        stored = ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover()
        registry = json.loads(observer.client.get(observer.paths.job(JOB))[0])
        assert registry["run_id"] == new_run  # the current run is in ZooKeeper

        # The older comes back and goes on calling: all refused, nothing changes.
        before = snapshot(service, observer, tmp_path)
        _refused(lambda: older.acknowledge(JOB, first, acks[1:]), old_run, new_run)
        _refused(lambda: older.acknowledge(JOB, second, acks), old_run, new_run)
        _refused(lambda: older.decline(JOB, second, "count", 0, "late"), old_run, new_run)
        _refused(lambda: older.heartbeat(JOB, 0), old_run, new_run)
        _refused(lambda: older.restore_plan(JOB, graph), old_run, new_run)
        _refused(lambda: older.trigger_checkpoint(JOB), old_run, new_run)
        _refused(lambda: older.trigger_savepoint(JOB, str(tmp_path / "sp")), old_run, new_run)
        assert snapshot(service, observer, tmp_path) == before
        assert ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover() == stored

        # The newer run alone completes the checkpoint; the older's first never completes.
        assert newer.acknowledge(JOB, second, acks)["status"] == "completed"
        overview = newer.checkpoints(JOB)
        assert overview["latest"]["completed"]["id"] == second
        assert first not in [p["checkpoint_id"] for p in overview["retained"]]
        beat = newer.heartbeat(JOB, 0)
        assert any(n.type == "abort" and n.checkpoint_id == first for n in beat.notifications)


def test_the_next_leader_still_refuses_a_superseded_run(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str
) -> None:
    graph = make_graph(JOB)
    first = _service(tmp_path / "a", zk_server.connect_string, cluster_id)
    try:
        with (
            CoordinatorClient(first.address, retry_for_s=10) as older,
            CoordinatorClient(first.address, retry_for_s=10) as newer,
        ):
            old_run = older.register_job(graph, CONFIG)["run_id"]
            new_run = newer.register_job(graph, CONFIG)["run_id"]
    finally:
        first.stop()  # the leader leaves; the next one reads the registry

    second = _service(tmp_path / "b", zk_server.connect_string, cluster_id)
    try:
        with CoordinatorClient(second.address, retry_for_s=10) as client:
            _refused(lambda: client.heartbeat(JOB, 0, run_id=old_run), old_run, new_run)
            assert client.heartbeat(JOB, 0, run_id=new_run).job_status == "RUNNING"
            cid = client.trigger_checkpoint(JOB)
            acks = _acks(graph)
            _refused(lambda: client.acknowledge(JOB, cid, acks, run_id=old_run), old_run, new_run)
            assert client.acknowledge(JOB, cid, acks, run_id=new_run)["status"] == "completed"
    finally:
        second.stop()


def test_an_older_runs_acks_never_complete_a_newer_runs_checkpoint(service) -> None:
    """Raw HTTP, as a zombie driver would send it: the older run's acknowledgements of a
    checkpoint triggered for the newer run are refused and complete nothing."""
    graph = make_graph(JOB)
    body = {"graph": graph.to_dict(), "checkpoint_config": CONFIG}
    acks = [
        {"operator_uid": op.uid, "subtask": i, "state": {"keyed": [], "operator": []}}
        for op in graph.operators
        for i in range(op.parallelism)
    ]
    with httpx.Client(base_url=service.address, timeout=10) as http:
        older = http.post("/v1/jobs", json=body).json().get("run_id")
        newer = http.post("/v1/jobs", json=body).json().get("run_id")
        cid = http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"]
        late = http.post(
            f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json={"acks": acks, "run_id": older}
        )
        assert late.status_code == 409, late.text
        assert late.json()["error"] == "run_superseded"
        assert older in late.json()["message"] and newer in late.json()["message"]
        overview = http.get(f"/v1/jobs/{JOB}/checkpoints").json()
        assert overview["counts"]["completed"] == 0
        done = http.post(
            f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json={"acks": acks, "run_id": newer}
        )
        assert done.json()["status"] == "completed"
