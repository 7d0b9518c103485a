"""A job registered again, and decisions taken on a view that may be stale: the ways a
completed checkpoint could lose its files or an id be used twice. Real ZooKeeper, a
coordinator replica in this process (its cleanup worker and sessions within reach),
real files, requests through the real REST API."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint import JobGraph
from sparkpoint.client import CoordinatorClient
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.runs.errors import NotLeaderError
from sparkpoint.service import Service
from sparkpoint.service.term import Term
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.coordinator.support import keyed_state
from tests.support.waiting import wait_until

from .support import make_graph, start_in_process

JOB = "sessions"
HOUR_MS = 3_600_000


@pytest.fixture
def service(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[Service]:
    svc = start_in_process(
        tmp_path,
        zk_server.connect_string,
        cluster_id,
        {
            "state.checkpoints.num-retained": "1",
            # The periodic scan stays out of the way: the tests ask for one.
            "state.checkpoints.orphan-cleanup.interval": "1 h",
            "state.checkpoints.orphan-cleanup.grace-period": "1 min",
            "execution.checkpointing.timeout": "1 min",
        },
    )
    yield svc
    svc.stop()


def acks(graph: JobGraph) -> list[tuple[str, int, Any]]:
    return [
        (op.uid, i, keyed_state(i, op.parallelism))
        for op in graph.operators
        for i in range(op.parallelism)
    ]


def complete(client: CoordinatorClient, graph: JobGraph) -> int:
    checkpoint_id = client.trigger_checkpoint(graph.job_id)
    assert client.acknowledge(graph.job_id, checkpoint_id, acks(graph))["status"] == "completed"
    return checkpoint_id


def retained(conn: ZooKeeperConnection) -> list[int]:
    return [p.checkpoint_id for p in ZooKeeperCompletedCheckpointStore(conn, JOB, None).recover()]


def leading_term(service: Service) -> Term:
    """The replica's term once it leads and has resumed its jobs."""

    def term() -> Term | None:
        try:
            return service.replica.active_term()
        except NotLeaderError:
            return None

    return wait_until(term, timeout=60, message="the replica leads")


def hold_cleanup(service: Service) -> threading.Event:
    """Hold the replica's deletion queue (what a slow HDFS does): set the event to go on."""
    gate = threading.Event()
    service.replica.cleanup.submit("held by the test", lambda: gate.wait(120))
    return gate


def test_a_job_registered_again_continues_its_ids_and_its_old_deletions_spare_it(
    service, observer, tmp_path
) -> None:
    graph = make_graph(JOB)
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": HOUR_MS})
        first = [complete(client, graph) for _ in range(3)]
        gate = hold_cleanup(service)
        client.cancel_job(JOB)
        wait_until(
            lambda: observer.client.exists(observer.paths.job(JOB)) is None,
            timeout=60,
            message="the cancelled job's record removed",
        )

        client.register_job(graph, {"interval_ms": HOUR_MS})
        second = [complete(client, graph) for _ in range(2)]
        assert min(second) > max(first)  # ids continue: no id of the job is used twice

        gate.set()  # the ended incarnation's deletions run now
        assert service.replica.cleanup.wait_idle(60)
        (kept,) = retained(observer)
        assert kept == second[-1]
        assert (job_dir / f"chk-{kept}" / "_metadata").is_file()
        for checkpoint_id in first:
            assert not (job_dir / f"chk-{checkpoint_id}").exists()


def test_deletions_a_term_queued_are_dropped_once_it_no_longer_leads(service, tmp_path) -> None:
    term = leading_term(service)
    gate = hold_cleanup(service)
    victim = tmp_path / "checkpoints" / JOB / "chk-7"
    victim.mkdir(parents=True)
    term._cleanup.submit("delete chk-7", victim.rmdir)
    term.leadership._revoke("the test ends the term")  # what the election does on a loss
    gate.set()
    assert service.replica.cleanup.wait_idle(60)
    assert victim.is_dir()
    assert service.replica.cleanup.dropped >= 1


def test_a_plan_made_after_a_graph_change_names_the_checkpoint_the_old_coordinator_completed(
    service, observer, tmp_path
) -> None:
    old_graph, new_graph = make_graph(JOB, 2), make_graph(JOB, 3)
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as old_driver:
        old_driver.register_job(old_graph, {"interval_ms": HOUR_MS})
        earlier = complete(old_driver, old_graph)

        # The old coordinator's next checkpoint is fully acknowledged and its pointer is on
        # its way to ZooKeeper (held just before the write) when the job is registered again.
        old_session = leading_term(service).session(JOB)
        publishing, go_on = threading.Event(), threading.Event()
        held_add = hold_once(old_session.store, "add_checkpoint_and_subsume_oldest",
                             publishing, go_on)  # fmt: skip
        latest = old_driver.trigger_checkpoint(JOB)
        ack = threading.Thread(
            target=old_driver.acknowledge, args=(JOB, latest, acks(old_graph)), daemon=True
        )
        ack.start()
        assert publishing.wait(60), "the old coordinator reached the store"

        with CoordinatorClient(service.address, retry_for_s=30) as new_driver:
            registered: list[dict[str, Any]] = []
            register = threading.Thread(
                target=lambda: registered.append(
                    new_driver.register_job(new_graph, {"interval_ms": HOUR_MS})
                ),
                daemon=True,
            )
            register.start()
            wait_until(lambda: old_session.coordinator.is_stopped, timeout=60,
                       message="the old coordinator stopped by the registration")  # fmt: skip
            go_on.set()
            register.join(60)
            ack.join(60)
            assert registered and held_add.calls == 1
            wait_until(lambda: retained(observer) == [latest], timeout=60,
                       message=f"checkpoint {latest} published by the old coordinator")  # fmt: skip

            reply = new_driver.restore_plan(JOB, new_graph)
            assert reply.restored is not None
            assert reply.restored["checkpoint_id"] == latest
            assert service.replica.cleanup.wait_idle(60)
            assert (job_dir / f"chk-{latest}" / "_metadata").is_file()
            assert not (job_dir / f"chk-{earlier}").exists()  # subsumed, rightly gone


class hold_once:
    """Wrap ``obj.name`` so that its first call signals ``entered`` and waits for
    ``go_on`` before doing what it does (the real call, against the real ZooKeeper)."""

    def __init__(
        self, obj: object, name: str, entered: threading.Event, go_on: threading.Event
    ) -> None:
        self.calls = 0
        original: Callable[..., Any] = getattr(obj, name)

        def held(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                entered.set()
                go_on.wait(120)
            return original(*args, **kwargs)

        setattr(obj, name, held)


def test_an_undecodable_pointer_keeps_its_checkpoint_directory(
    tmp_path, zk_server, cluster_id, observer
) -> None:
    graph = make_graph(JOB)
    job_dir = tmp_path / "checkpoints" / JOB
    settings = {
        "state.checkpoints.num-retained": "2",
        "state.checkpoints.orphan-cleanup.interval": "1 h",
        "state.checkpoints.orphan-cleanup.grace-period": "500 ms",
        "execution.checkpointing.timeout": "500 ms",  # may not exceed the grace period
    }
    first = start_in_process(tmp_path, zk_server.connect_string, cluster_id, settings)
    try:
        with CoordinatorClient(first.address, retry_for_s=10) as client:
            client.register_job(graph, {"interval_ms": HOUR_MS})
            older, newer = complete(client, graph), complete(client, graph)
    finally:
        first.stop()
    # A pointer written by a newer release during a rolling upgrade, as this one reads it.
    observer.client.set(observer.paths.checkpoint(JOB, older), b"\x00sparkpoint-pointer-v9")

    second = start_in_process(tmp_path, zk_server.connect_string, cluster_id, settings)
    try:
        term = leading_term(second)
        report = term.orphans.collect(dry_run=False)
        (job,) = report.jobs
        assert older in job.retained and newer in job.retained
        assert not job.removed
        assert (job_dir / f"chk-{older}" / "_metadata").is_file()
        gauge = f'sparkpoint_orphan_undecodable_pointers{{job_id="{JOB}"}} 1.0'
        assert gauge in metrics_text(second)
    finally:
        second.stop()


def metrics_text(service: Service) -> str:
    import httpx

    return httpx.get(f"{service.address}/metrics", timeout=5).text
