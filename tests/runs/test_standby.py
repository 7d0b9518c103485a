"""A warm standby driver run on a real leader (real ZooKeeper, real HTTP): it waits,
heartbeating, while the active run heartbeats; when the active run goes silent for the
driver takeover timeout, or releases the job, the leader ends that run (the run-id fence
refuses it from then on) and grants the job to the standby."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkpoint.checkpoint import JobGraph, OperatorSpec, OperatorSubtaskState
from sparkpoint.client import ClientError, Conflict, CoordinatorClient, Superseded
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.pipeline.channels.liveness import LivenessListener
from tests.coordinator.support import keyed_state
from tests.service.support import ReplicaProcess, make_graph, spawn_replica
from tests.service.test_api_requests import JOB, _service
from tests.support.netns import NetnsHost
from tests.support.waiting import wait_until

CONFIG = {"interval_ms": 3_600_000}


def _acks(graph) -> list[tuple[str, int, OperatorSubtaskState]]:
    return [
        (op.uid, i, keyed_state(i, op.parallelism) if op.keyed else OperatorSubtaskState())
        for op in graph.operators
        for i in range(op.parallelism)
    ]


def _granted(client: CoordinatorClient) -> bool:
    return client.heartbeat(JOB, 0).role == "active"


def test_a_silent_active_run_is_ended_and_the_standby_granted(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str, observer
) -> None:
    service = _service(
        tmp_path, zk_server.connect_string, cluster_id, **{"driver.takeover-timeout": "1 s"}
    )
    graph = make_graph(JOB)
    acks = _acks(graph)
    try:
        with (
            CoordinatorClient(service.address, retry_for_s=10) as active,
            CoordinatorClient(service.address, retry_for_s=10) as standby,
        ):
            reply = active.register_job(graph, CONFIG)
            active_run = reply["run_id"]
            assert reply["role"] == "active"
            active.restore_plan(JOB, graph)
            torn = active.trigger_checkpoint(JOB)
            assert active.acknowledge(JOB, torn, acks[:1])["status"] == "pending"

            reply = standby.register_job(graph, CONFIG, standby=True)
            standby_run = reply["run_id"]
            assert reply["role"] == "standby" and standby_run != active_run
            record = json.loads(observer.client.get(observer.paths.job(JOB))[0])
            assert (record["run_id"], record["standby_run_id"]) == (active_run, standby_run)
            # A standby takes part in nothing: no notices, its acks refused.
            beat = standby.heartbeat(JOB, 0)
            assert beat.role == "standby" and beat.notifications == []
            with pytest.raises(Superseded):
                standby.acknowledge(JOB, torn, acks[1:])

            # The active driver dies (no more heartbeats): the standby is granted the job.
            wait_until(lambda: _granted(standby), timeout=30, message="the standby is granted")
            with pytest.raises(Superseded) as refused:
                active.acknowledge(JOB, torn, acks[1:])
            assert active_run in refused.value.message and standby_run in refused.value.message
            with pytest.raises(Superseded):
                active.heartbeat(JOB, 0)
            record = json.loads(observer.client.get(observer.paths.job(JOB))[0])
            assert (record["run_id"], record["standby_run_id"]) == (standby_run, "")

            # The granted run restores and completes checkpoints by itself.
            assert standby.restore_plan(JOB, graph).restored is None
            cid = standby.trigger_checkpoint(JOB)
            assert standby.acknowledge(JOB, cid, acks)["status"] == "completed"
            overview = standby.checkpoints(JOB)
            assert overview["latest"]["completed"]["id"] == cid
            assert torn not in [p["checkpoint_id"] for p in overview["retained"]]
    finally:
        service.stop()


def test_a_released_job_goes_to_the_standby_at_once(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str
) -> None:
    # A takeover timeout far beyond the test: only the release can move the job.
    service = _service(
        tmp_path, zk_server.connect_string, cluster_id, **{"driver.takeover-timeout": "1 h"}
    )
    graph = make_graph(JOB)
    try:
        with (
            CoordinatorClient(service.address, retry_for_s=10) as active,
            CoordinatorClient(service.address, retry_for_s=10) as standby,
            CoordinatorClient(service.address, retry_for_s=10) as late,
        ):
            active_run = active.register_job(graph, CONFIG)["run_id"]
            assert standby.register_job(graph, CONFIG, standby=True)["role"] == "standby"
            assert standby.heartbeat(JOB, 0).role == "standby"
            # A second standby replaces the first, whose heartbeats are refused.
            standby_run = late.register_job(graph, CONFIG, standby=True)["run_id"]
            with pytest.raises(Superseded):
                standby.heartbeat(JOB, 0)
            assert late.heartbeat(JOB, 0).role == "standby"
            # A standby must run the active run's graph (at any parallelism: granted, it
            # adopts the job's), not other operators.
            other = JobGraph(JOB, (OperatorSpec("source", 2, 128), OperatorSpec("other", 2, 128)))
            with pytest.raises(Conflict) as conflict:
                late.register_job(other, CONFIG, standby=True)
            assert conflict.value.code == "job_graph_conflict"

            active.release(JOB)
            wait_until(lambda: _granted(late), timeout=30, message="the standby is granted")
            with pytest.raises(Superseded) as refused:
                active.heartbeat(JOB, 0)
            assert active_run in refused.value.message and standby_run in refused.value.message
    finally:
        service.stop()


def test_a_standby_is_granted_at_once_when_the_active_drivers_process_is_gone(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str, observer
) -> None:
    # A takeover timeout far beyond the test: only the liveness probe can move the job.
    service = _service(
        tmp_path,
        zk_server.connect_string,
        cluster_id,
        **{"driver.takeover-timeout": "1 h", "driver.probe-after": "0.2 s"},
    )
    graph = make_graph(JOB)
    process = LivenessListener("127.0.0.1")  # the active driver's process, as the probe sees it
    try:
        with (
            CoordinatorClient(service.address, retry_for_s=10) as active,
            CoordinatorClient(service.address, retry_for_s=10) as standby,
        ):
            active_run = active.register_job(graph, CONFIG, probe_address=process.address)["run_id"]
            standby_run = standby.register_job(graph, CONFIG, standby=True)["run_id"]
            record = json.loads(observer.client.get(observer.paths.job(JOB))[0])
            assert record["run_address"] == process.address

            # Silent but listening (a frozen or busy driver): probed, found alive, kept.
            wait_until(
                lambda: not _granted(standby) and process.accepted >= 3,
                timeout=30,
                message="the silent active run is probed",
            )
            assert active.heartbeat(JOB, 0).role == "active"

            process.close()  # the process is gone: its port refuses
            wait_until(lambda: _granted(standby), timeout=30, message="the standby is granted")
            with pytest.raises(Superseded) as refused:
                active.heartbeat(JOB, 0)
            assert active_run in refused.value.message and standby_run in refused.value.message
            record = json.loads(observer.client.get(observer.paths.job(JOB))[0])
            assert (record["run_id"], record["standby_run_id"]) == (standby_run, "")
    finally:
        process.close()
        service.stop()


def test_a_malformed_probe_address_is_refused_and_registers_nothing(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str, observer
) -> None:
    service = _service(tmp_path, zk_server.connect_string, cluster_id)
    try:
        with CoordinatorClient(service.address, retry_for_s=10) as client:
            with pytest.raises(ClientError) as refused:
                client.register_job(make_graph(JOB), CONFIG, probe_address="no port here")
            assert "probe_address" in str(refused.value)
        assert observer.client.exists(observer.paths.job(JOB)) is None
    finally:
        service.stop()


@pytest.mark.slow
def test_a_leader_in_another_namespace_never_takes_a_loopback_driver_for_gone(
    tmp_path: Path, cluster_id: str
) -> None:
    # The driver reached its coordinator over loopback (a port-forward) and advertised
    # 127.0.0.1:P. A leader on another host or namespace would probe its *own* loopback,
    # be refused, and grant the standby while the driver lives: it must not trust it.
    host = NetnsHost.create(subnet=21)
    zk = LocalZooKeeper(tmp_path / "zk", host=host.host_addr, tick_time_ms=200).start()
    leader: ReplicaProcess | None = None
    process = LivenessListener("127.0.0.1")  # the live driver, on this namespace's loopback
    try:
        leader = spawn_replica(
            tmp_path / "replicas", "inside", quorum=zk.connect_string, cluster_id=cluster_id,
            checkpoints_dir=tmp_path / "checkpoints", prefix=host.prefix, host=host.ns_addr,
            settings={"rest.bind-address": host.ns_addr, "driver.takeover-timeout": "1 h",
                      "driver.probe-after": "0.2 s"},
        )  # fmt: skip
        wait_until(lambda: leader.state() == "leader", timeout=90, message="inside leads")
        graph = make_graph(JOB)
        with (
            CoordinatorClient(leader.address, retry_for_s=10) as active,
            CoordinatorClient(leader.address, retry_for_s=10) as standby,
        ):
            active.register_job(graph, CONFIG, probe_address=process.address)
            standby.register_job(graph, CONFIG, standby=True)
            # The active run is silent from here on; the standby heartbeats.
            wait_until(
                lambda: (
                    not _granted(standby)
                    and leader.metric('sparkpoint_driver_probes_total{verdict="unknown"}') >= 5
                ),
                timeout=60,
                message="the silent run probed five times and judged unknown",
            )
            assert not _granted(standby)
            assert leader.metric('sparkpoint_driver_probes_total{verdict="gone"}') == 0
            assert active.heartbeat(JOB, 0).role == "active"
    finally:
        process.close()
        if leader is not None:
            leader.kill()
        zk.stop()
        host.destroy()
