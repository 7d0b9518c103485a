"""Bad requests to a real leader (in-process replica, real ZooKeeper, real HTTP): each gets a
4xx with a message and changes nothing — checked in ZooKeeper and on disk."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sparkpoint.checkpoint import JobGraph, OperatorSpec, OperatorSubtaskState
from sparkpoint.client import CoordinatorClient, Invalid, NotFound
from sparkpoint.config import load_config
from sparkpoint.devcluster.zookeeper import LocalZooKeeper, free_port
from sparkpoint.service import Service, start_service
from sparkpoint.service.api.limits import MAX_BODY_BYTES
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.coordinator.support import keyed_state
from tests.support.waiting import wait_until

from .support import make_graph, start_in_process

JOB = "orders"


def _service(tmp_path: Path, quorum: str, cluster_id: str, **extra: str) -> Service:
    settings = {"state.checkpoints.num-retained": "10", **extra}
    return start_in_process(tmp_path, quorum, cluster_id, settings)


@pytest.fixture
def service(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[Service]:
    svc = _service(tmp_path, zk_server.connect_string, cluster_id)
    yield svc
    svc.stop()


@pytest.fixture
def http(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.address, timeout=10) as client:
        yield client


def register(http: httpx.Client, **options: int) -> str:
    """A job whose periodic checkpoints never come due during a test (manual triggers).
    Returns the driver run the registration started."""
    config = {"interval_ms": 3_600_000, **options}
    body = {"graph": make_graph(JOB).to_dict(), "checkpoint_config": config}
    reply = http.post("/v1/jobs", json=body)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["run_id"])


def ack_body(run: str, *subtasks: tuple[str, int]) -> dict:
    return {
        "acks": [
            {"operator_uid": uid, "subtask": i, "state": {"keyed": [], "operator": []}}
            for uid, i in subtasks
        ],
        "run_id": run,
    }


ALL = [("source", 0), ("source", 1), ("count", 0), ("count", 1)]


def snapshot(service: Service, observer, tmp_path: Path) -> tuple:
    """What a refused request must not change: store, files, the pending checkpoints."""
    stored = ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover()
    files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "checkpoints").rglob("*"))
    term = service.replica.term
    pending = []
    if term is not None:
        coordinator = term.session(JOB).coordinator
        for cid in coordinator.pending_checkpoint_ids():
            p = coordinator.pending_checkpoint(cid)
            pending.append((cid, sorted(p.waiting_for())))
    return stored, files, pending


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code and body["message"], body


def test_bad_acks_change_nothing(service, http, observer, tmp_path) -> None:
    run = register(http)
    cid = http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"]
    assert (
        http.post(
            f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=ack_body(run, ("source", 0))
        ).json()["remaining"]
        == 3
    )
    before = snapshot(service, observer, tmp_path)

    acks = f"/v1/jobs/{JOB}/checkpoints/{cid}/acks"
    bad_handle = {"operator_uid": "count", "subtask": 0, "state": {"keyed": [{"key_groups": [0]}]}}
    cases = [
        (f"/v1/jobs/nope/checkpoints/{cid}/acks", ack_body(run, ("source", 1)), 404, "unknown_job"),
        (f"/v1/jobs/{JOB}/checkpoints/999/acks", ack_body(run, ("source", 1)), 404,
         "unknown_checkpoint"),
        (acks, ack_body(run, ("source", 0)), 409, "duplicate_ack"),
        # all or nothing: a good ack beside a duplicate is not applied either
        (acks, ack_body(run, ("count", 0), ("source", 0)), 409, "duplicate_ack"),
        (acks, ack_body(run, ("source", 7)), 422, "unexpected_subtask"),
        (acks, ack_body(run, ("nosuch", 0)), 422, "unexpected_subtask"),
        (acks, {"acks": [bad_handle]}, 422, "invalid_request"),
        (acks, {"acks": "no"}, 422, "invalid_request"),
        (f"/v1/jobs/{JOB}/checkpoints/{cid}/decline",
         {"operator_uid": "x", "subtask": 0, "run_id": run}, 422, "unexpected_subtask"),
    ]  # fmt: skip
    for path, body, status, code in cases:
        refused(http.post(path, json=body), status, code)
        assert snapshot(service, observer, tmp_path) == before, path

    malformed = http.post(
        f"/v1/jobs/{JOB}/checkpoints/{cid}/acks",
        content=b'{"acks": [',
        headers={"content-type": "application/json"},
    )
    refused(malformed, 422, "invalid_request")
    oversized = http.post(
        f"/v1/jobs/{JOB}/checkpoints/{cid}/acks",
        content=b" " * (MAX_BODY_BYTES + 1),
        headers={"content-type": "application/json"},
    )
    refused(oversized, 413, "body_too_large")
    assert snapshot(service, observer, tmp_path) == before

    # The rest completes the checkpoint; then it is finished: 409, nothing changes.
    done = http.post(f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=ack_body(run, *ALL[1:]))
    assert done.json()["status"] == "completed"
    after = snapshot(service, observer, tmp_path)
    assert [p.checkpoint_id for p in after[0]] == [cid]
    for body in (ack_body(run, ("source", 1)), ack_body(run, ("count", 1))):
        refused(
            http.post(f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=body),
            409,
            "checkpoint_finished",
        )
    assert snapshot(service, observer, tmp_path) == after


def test_register_conflicts_and_options(service, http, observer) -> None:
    register(http)
    same = {"graph": make_graph(JOB).to_dict(), "checkpoint_config": {"interval_ms": 3_600_000}}
    again = http.post("/v1/jobs", json=same)
    assert again.status_code == 200 and again.json()["status"] == "RUNNING"
    other = make_graph(JOB).to_dict()
    other["operators"][1]["uid"] = "sum"
    refused(http.post("/v1/jobs", json={"graph": other}), 409, "job_graph_conflict")
    refused(
        http.post("/v1/jobs", json={**same, "checkpoint_config": {"interval_ms": 1}}),
        400,
        "invalid_option",
    )
    refused(
        http.post("/v1/jobs", json={**same, "checkpoint_config": {"interval": 5}}),
        400,
        "invalid_option",
    )
    bad_graph = make_graph(JOB).to_dict()
    bad_graph["operators"][0]["parallelism"] = 0
    refused(http.post("/v1/jobs", json={"graph": bad_graph}), 422, "invalid_request")
    record = json.loads(observer.client.get(observer.paths.job(JOB))[0])
    assert [op["uid"] for op in record["graph"]["operators"]] == ["source", "count"]
    assert record["checkpoint_config"] == {"interval_ms": 3_600_000}


def test_storage_failure_fails_only_that_checkpoint(service, http, observer, tmp_path) -> None:
    run = register(http, tolerable_failures=1)
    first = http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"]
    directory = tmp_path / "checkpoints" / JOB / f"chk-{first}"
    # The checkpoint directory turns into a file: `_metadata` cannot be written into it
    # (a permission change would not stop root, which the tests may run as).
    directory.rmdir()
    directory.write_text("not a directory")
    reply = http.post(f"/v1/jobs/{JOB}/checkpoints/{first}/acks", json=ack_body(run, *ALL)).json()
    assert reply["status"] == "failed" and "_metadata" in reply["reason"], reply
    assert ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover() == []
    overview = http.get(f"/v1/jobs/{JOB}/checkpoints").json()
    assert overview["latest"]["failed"]["id"] == first
    assert "_metadata" in overview["latest"]["failed"]["failure_message"]

    second = http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"]
    assert second > first
    assert (
        http.post(f"/v1/jobs/{JOB}/checkpoints/{second}/acks", json=ack_body(run, *ALL)).json()[
            "status"
        ]
        == "completed"
    )
    stored = ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover()
    assert [p.checkpoint_id for p in stored] == [second]
    assert (tmp_path / "checkpoints" / JOB / f"chk-{second}" / "_metadata").is_file()


def test_follower_redirects_and_answers_status(
    service, http, observer, tmp_path, zk_server, *, cluster_id
) -> None:
    run = register(http)
    cid = http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"]
    http.post(f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=ack_body(run, *ALL))
    # A contender that queues before the follower but never leads: once the leader
    # leaves, nobody leads (the follower waits behind it) — the 503 case, deterministically.
    observer.client.create(
        f"{observer.paths.latch}/c_blocker_",
        b'{"instance_id": "blocker", "address": ""}',
        ephemeral=True,
        sequence=True,
    )
    follower = _follower(tmp_path, zk_server.connect_string, cluster_id)
    try:
        with httpx.Client(base_url=follower.address, timeout=10) as f:
            moved = f.post(f"/v1/jobs/{JOB}/heartbeat", json={"after_seq": 0, "run_id": run})
            assert moved.status_code == 307
            assert moved.headers["location"] == f"{service.address}/v1/jobs/{JOB}/heartbeat"
            # Asked to, the follower forwards the call and returns the leader's answer.
            forwarded = f.post(
                f"/v1/jobs/{JOB}/heartbeat", json={"after_seq": 0, "run_id": run},
                headers={"Sparkpoint-Proxy": "allow"},
            )  # fmt: skip
            assert forwarded.status_code == 200, forwarded.text
            direct = http.post(f"/v1/jobs/{JOB}/heartbeat", json={"after_seq": 0, "run_id": run})
            assert forwarded.json()["leader_term"] == direct.json()["leader_term"]
            jobs = f.get("/v1/jobs").json()["jobs"]
            assert [j["job_id"] for j in jobs] == [JOB]
            overview = f.get(f"/v1/jobs/{JOB}/checkpoints").json()
            assert overview["source"] == "zookeeper"
            assert [p["checkpoint_id"] for p in overview["retained"]] == [cid]
            detail = f.get(f"/v1/jobs/{JOB}/checkpoints/{cid}").json()
            assert detail["metadata"]["checkpoint_id"] == cid
            refused(f.get(f"/v1/jobs/{JOB}/checkpoints/12345"), 404, "unknown_checkpoint")
            refused(f.get("/v1/jobs/nope"), 404, "unknown_job")
            assert f.get("/readyz").status_code == 200
            # The client: a dead address, then the follower, which forwards its calls to
            # the leader (the client asks it to: Sparkpoint-Proxy: allow).
            dead = f"127.0.0.1:{free_port()}"
            with CoordinatorClient([dead, follower.address], retry_for_s=10) as client:
                beat = client.heartbeat(JOB, 0, run_id=run)
                assert client.leader_address == follower.address
                assert [n.checkpoint_id for n in beat.notifications if n.type == "complete"] == [
                    cid
                ]
            service.replica.stop()  # the leader leaves; nobody else contends
            gone = wait_until(
                lambda: (
                    (r := f.post(f"/v1/jobs/{JOB}/heartbeat", json={"run_id": run})).status_code
                    == 503
                    and r
                ),
                timeout=20,
                message="503 while there is no leader",
            )
            refused(gone, 503, "no_leader")
            assert f.get("/v1/leader").json()["leader"] is None
            assert gone.headers["retry-after"] == "1"
    finally:
        follower.stop()


def _follower(tmp_path: Path, quorum: str, cluster_id: str) -> Service:
    """A second replica that never leads while the first one does."""
    config = load_config(
        overrides={
            "high-availability.zookeeper.quorum": quorum,
            "high-availability.cluster-id": cluster_id,
            "high-availability.type": "zookeeper",
            # No lease: with the leader gone, only the election queue decides (blocked).
            "high-availability.lease.takeover-timeout": "0 s",
            "rest.port": "0",
            "rest.auth.enabled": "false",
            "state.checkpoints.dir": str(tmp_path / "checkpoints"),
        },
        environ={},
    )
    svc = start_service(config)
    wait_until(svc.replica.is_ready, timeout=20, message="follower ready")
    return svc


def test_restore_plan_rescales_from_the_latest_checkpoint(service, http) -> None:
    client = CoordinatorClient(service.address, retry_for_s=10)
    try:
        graph = make_graph(JOB)
        client.register_job(graph, {"interval_ms": 3_600_000})
        assert client.restore_plan(JOB, graph).restored is None  # nothing yet: first start
        cid = client.trigger_checkpoint(JOB)
        acks = [
            (op.uid, i, keyed_state(i, op.parallelism) if op.keyed else OperatorSubtaskState())
            for op in graph.operators
            for i in range(op.parallelism)
        ]
        assert client.acknowledge(JOB, cid, acks)["status"] == "completed"

        wider = make_graph(JOB, parallelism=3)
        answer = client.restore_plan(JOB, wider)
        assert answer.restored is not None and answer.restored["checkpoint_id"] == cid
        assert answer.plan is not None and answer.plan.checkpoint_id == cid
        count = answer.plan.operators["count"]
        assert count.old_parallelism == 2 and count.parallelism == 3
        covered = [g for s in count.subtasks for h in s.keyed for g in h.key_group_range]
        assert sorted(covered) == list(range(128))  # every key group lands somewhere
        overview = client.checkpoints(JOB)
        assert overview["counts"]["restored"] == 1
        assert overview["latest"]["restored"]["id"] == cid

        other_max = JobGraph(
            JOB,
            (OperatorSpec("source", 2, 128), OperatorSpec("count", 2, 256, keyed=True)),
        )
        with pytest.raises(Invalid) as refused_plan:
            client.restore_plan(JOB, other_max)
        assert refused_plan.value.code == "restore_validation"
        assert "count" in refused_plan.value.message
        with pytest.raises(NotFound):
            client.restore_plan("nope", graph, run_id="any")
        assert client.trigger_checkpoint(JOB) > cid
    finally:
        client.close()


def test_a_new_driver_run_never_completes_an_earlier_runs_checkpoint(service, http) -> None:
    old, new = (CoordinatorClient(service.address, retry_for_s=10) for _ in range(2))
    try:
        graph = make_graph(JOB)
        old.register_job(graph, {"interval_ms": 3_600_000})
        old.restore_plan(JOB, graph)
        acks = [
            (op.uid, i, keyed_state(i, op.parallelism) if op.keyed else OperatorSubtaskState())
            for op in graph.operators
            for i in range(op.parallelism)
        ]
        done = old.trigger_checkpoint(JOB)
        assert old.acknowledge(JOB, done, acks)["status"] == "completed"
        # The first run acknowledges half of the next checkpoint, then its driver dies.
        torn = old.trigger_checkpoint(JOB)
        assert old.acknowledge(JOB, torn, acks[:1])["status"] == "pending"

        # A new run registers: the torn checkpoint is aborted, so the new run's
        # acknowledgements can never complete it with a mixed cut.
        registered = new.register_job(graph, {"interval_ms": 3_600_000})
        answer = new.restore_plan(JOB, graph)
        assert answer.restored is not None and answer.restored["checkpoint_id"] == done
        finished = http.post(
            f"/v1/jobs/{JOB}/checkpoints/{torn}/acks",
            json={"acks": [{"operator_uid": uid, "subtask": i,
                            "state": {"keyed": [], "operator": []}} for uid, i, _ in acks[1:]],
                  "run_id": registered["run_id"]},
        )  # fmt: skip
        refused(finished, 409, "checkpoint_finished")
        overview = new.checkpoints(JOB)
        assert overview["latest"]["completed"]["id"] == done
        assert [p["checkpoint_id"] for p in overview["retained"]][-1] == done
        # And the new run's heartbeats start after the earlier run's notices.
        beat = new.heartbeat(JOB, registered["notification_seq"])
        assert all(n.checkpoint_id != torn or n.type == "abort" for n in beat.notifications)
        assert new.trigger_checkpoint(JOB) > torn
    finally:
        old.close()
        new.close()


def test_client_imports_no_kazoo_pyspark_or_service() -> None:
    code = (
        "import sys, sparkpoint.client\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('kazoo', 'pyspark')"
        " or m.startswith('sparkpoint.service') or m.startswith('sparkpoint.ha')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_stop_with_savepoint_finishes_the_job(service, http, observer, tmp_path) -> None:
    client = CoordinatorClient(service.address, retry_for_s=10)
    try:
        graph = make_graph(JOB)
        client.register_job(graph, {"interval_ms": 3_600_000})
        target = tmp_path / "savepoints" / "named"  # under state.savepoints.dir
        sid = client.trigger_savepoint(JOB, str(target), stop=True)
        beat = client.heartbeat(JOB, 0)
        trigger = next(n for n in beat.notifications if n.checkpoint_id == sid)
        assert (trigger.type, trigger.kind, trigger.stop) == ("trigger", "savepoint", True)
        assert trigger.directory and trigger.directory.startswith(str(target))
        refused(http.post(f"/v1/jobs/{JOB}/checkpoints"), 409, "trigger_rejected")
        acks = [
            (op.uid, i, OperatorSubtaskState())
            for op in graph.operators
            for i in range(op.parallelism)
        ]
        assert client.acknowledge(JOB, sid, acks)["status"] == "completed"
        beat = client.heartbeat(JOB, trigger.seq)
        done = next(n for n in beat.notifications if n.type == "complete")
        assert done.checkpoint_id == sid and done.stop and done.metadata_uri
        assert beat.job_status == "FINISHED"
        assert (Path(trigger.directory) / "_metadata").is_file()
        # The stop's savepoint is the job's last restore point (a leader lost before the
        # job's end was recorded resumes it there); the job is over, so its record goes
        # with its counter and store (tests/service/test_job_end.py).
        retained = ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover()
        assert [p.checkpoint_id for p in retained] in ([sid], [])
        wait_until(
            lambda: observer.client.exists(observer.paths.job(JOB)) is None,
            timeout=10,
            message="the finished job's registry record removed",
        )
        assert client.register_job(graph, {"interval_ms": 3_600_000})["status"] == "RUNNING"
    finally:
        client.close()


def test_job_without_heartbeats_is_disconnected_and_not_triggered(
    tmp_path, zk_server, cluster_id
) -> None:
    service = _service(
        tmp_path, zk_server.connect_string, cluster_id, **{"heartbeat.timeout": "400 ms"}
    )
    try:
        with httpx.Client(base_url=service.address, timeout=10) as http:
            # Checkpoints every 50 ms that nobody acknowledges expire after 200 ms.
            run = register(http, interval_ms=50, timeout_ms=200, tolerable_failures=1_000_000)

            def overview() -> dict:
                return http.get(f"/v1/jobs/{JOB}/checkpoints").json()

            def connected() -> bool:
                return http.get("/v1/jobs").json()["jobs"][0]["connected"]

            assert not connected() and overview()["counts"]["total"] == 0
            http.post(f"/v1/jobs/{JOB}/heartbeat", json={"after_seq": 0, "run_id": run})
            wait_until(lambda: overview()["counts"]["total"] >= 2, timeout=10, message="triggers")
            wait_until(lambda: not connected(), timeout=10, message="driver marked disconnected")
            # Every pending checkpoint still expires while disconnected ...
            wait_until(
                lambda: overview()["counts"]["in_progress"] == 0,
                timeout=10,
                message="pending checkpoints expire",
            )
            total = overview()["counts"]["total"]
            # ... but over ten more intervals none is triggered (a window, not a sync point).
            window_end = time.monotonic() + 0.5
            wait_until(lambda: time.monotonic() > window_end, timeout=5, message="window")
            quiet = overview()["counts"]
            assert quiet["total"] == total and quiet["failed"] == total
            assert quiet["in_progress"] == 0
            http.post(f"/v1/jobs/{JOB}/heartbeat", json={"after_seq": 0, "run_id": run})
            wait_until(
                lambda: overview()["counts"]["total"] > total,
                timeout=10,
                message="triggering resumes with the driver",
            )
    finally:
        service.stop()
