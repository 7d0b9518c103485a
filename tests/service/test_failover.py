"""Failover between real replica processes (`sparkpoint coordinator run`) under a driver
that checkpoints every 500 ms: kill -9, SIGTERM, and a zombie leader."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from sparkpoint.ha import ZooKeeperConnection, list_contenders, read_leader
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.support.waiting import wait_until

from .support import Driver, ReplicaProcess, empty_acks, make_graph, wait_leader

JOB = "clicks"


def stored_ids(conn: ZooKeeperConnection) -> list[int]:
    return [p.checkpoint_id for p in ZooKeeperCompletedCheckpointStore(conn, JOB, None).recover()]


def assert_history_sound(driver: Driver, conn: ZooKeeperConnection) -> None:
    """Ids rise and are never reused; nothing is completed twice; the store agrees."""
    triggered = [cid for _, cid in driver.triggered]
    assert len(triggered) == len(set(triggered)), f"an id was triggered twice: {triggered}"
    assert triggered == sorted(triggered), f"ids did not keep rising: {triggered}"
    completed = driver.completed_ids()
    assert len(completed) == len(set(completed)), f"completed twice: {completed}"
    stored = stored_ids(conn)
    assert set(completed) <= set(stored), (completed, stored)


@pytest.mark.slow
def test_kill_9_leader_new_leader_continues_without_reregistration(replicas, observer) -> None:
    procs: list[ReplicaProcess] = [replicas(f"r{i}") for i in range(3)]
    old = wait_leader(procs)
    driver = Driver([p.address for p in procs], make_graph(JOB)).start()
    try:
        wait_until(lambda: len(driver.completed) >= 3, timeout=30, message="3 checkpoints")
        old.signal(signal.SIGKILL)
        old.proc.wait(10)
        before_kill = stored_ids(observer)  # the dead leader can change nothing any more
        old_epoch = driver.completed[-1][0]
        old_triggered = {cid for e, cid in driver.triggered if e == old_epoch}
        assert before_kill, "checkpoints completed before the kill are in the store"

        new = wait_leader([p for p in procs if p is not old])
        wait_until(
            lambda: len([e for e, _ in driver.completed if e > old_epoch]) >= 3,
            timeout=40,
            message="3 checkpoints completed by the new leader",
        )
        after = stored_ids(observer)
        assert set(before_kill) <= set(after), "a completed checkpoint was lost"
        new_ids = [cid for e, cid in driver.triggered if e > old_epoch]
        assert min(new_ids) > max(old_triggered), "the new leader reused an id"
        # The old leader's pending checkpoints never complete: not in the store, never
        # announced as complete.
        never_done = old_triggered - set(before_kill)
        assert not never_done & set(after)
        assert not never_done & set(driver.completed_ids())
        assert driver.registrations == 1
        assert read_leader(observer).instance_id == new.name
        assert new.metric("sparkpoint_is_leader") == 1
        assert new.metric(f'sparkpoint_checkpoints_completed_total{{job_id="{JOB}"}}') >= 3
        follower = next(p for p in procs if p not in (old, new))
        assert follower.metric("sparkpoint_is_leader") == 0
        assert_history_sound(driver, observer)
    finally:
        driver.stop()


@pytest.mark.slow
def test_sigterm_hands_over_without_waiting_for_the_session(replicas, observer) -> None:
    session_timeout = 20.0  # a handover that waited for expiry would blow the deadline
    # No lease either: only the released leadership can make the handover quick.
    no_lease = {"high-availability.lease.takeover-timeout": "0 s"}
    procs = [
        replicas(f"t{i}", session_timeout=f"{session_timeout:g} s", settings=no_lease)
        for i in range(2)
    ]
    old = wait_leader(procs)
    driver = Driver([p.address for p in procs], make_graph(JOB)).start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=30, message="2 checkpoints")
        old_epoch = driver.completed[-1][0]
        started = time.monotonic()
        old.signal(signal.SIGTERM)
        assert old.proc.wait(session_timeout / 2) == 0, old.log()
        new = wait_leader(procs, timeout=session_timeout / 2 - (time.monotonic() - started))
        assert new is not old
        wait_until(
            lambda: any(e > old_epoch for e, _ in driver.completed),
            timeout=session_timeout / 2,
            message="a checkpoint completed by the new leader",
        )
        assert driver.registrations == 1
        assert_history_sound(driver, observer)
    finally:
        driver.stop()


@pytest.mark.slow
def test_zombie_leader_completes_nothing_and_steps_down(replicas, observer) -> None:
    procs = [replicas(f"z{i}") for i in range(2)]
    zombie = wait_leader(procs)
    driver = Driver([p.address for p in procs], make_graph(JOB)).start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=30, message="2 checkpoints")
        driver.acking.clear()  # keep the next trigger's acknowledgements back
        held = wait_until(lambda: list(driver.held), timeout=10, message="a held trigger")
        zombie_epoch, held_id = held[0]

        zombie.signal(signal.SIGSTOP)
        survivor = next(p for p in procs if p is not zombie)
        wait_until(
            lambda: (
                (info := read_leader(observer)) is not None and info.instance_id == survivor.name
            ),
            timeout=30,
            message="the other replica takes over while the leader is stopped",
        )
        # Past its session timeout: ZooKeeper dropped its ephemeral latch node.
        wait_until(
            lambda: zombie.name not in {c.instance_id for c in list_contenders(observer)},
            timeout=30,
            message="the stopped leader's session expires",
        )
        driver.acking.set()
        wait_until(
            lambda: any(e > zombie_epoch for e, _ in driver.completed),
            timeout=30,
            message="the new leader completes a checkpoint",
        )
        before = stored_ids(observer)

        zombie.signal(signal.SIGCONT)
        # The held acknowledgements go straight to the zombie, as a slow network would.
        body = empty_acks(driver.graph, driver.run_id)
        response = httpx.post(
            f"{zombie.address}/v1/jobs/{JOB}/checkpoints/{held_id}/acks", json=body, timeout=30
        )
        # Redirected (it knows it lost), or refused mid-way (its store write was fenced).
        assert response.status_code in (307, 503), response.text
        wait_until(lambda: zombie.state() == "follower", timeout=30, message="zombie steps down")
        assert zombie.metric("sparkpoint_fenced_writes_total") >= 1
        assert held_id not in stored_ids(observer)
        assert set(before) <= set(stored_ids(observer))
        assert held_id not in driver.completed_ids()
        assert read_leader(observer).instance_id == survivor.name
        assert_history_sound(driver, observer)
    finally:
        driver.stop()


def test_embedded_replica_serves_and_exits_cleanly_on_sigterm(tmp_path) -> None:
    from .support import spawn_embedded

    replica = spawn_embedded(tmp_path, "solo")
    try:
        wait_leader([replica])
        driver = Driver([replica.address], make_graph(JOB)).start()
        try:
            wait_until(lambda: len(driver.completed) >= 2, timeout=30, message="checkpoints")
        finally:
            driver.stop()
        assert httpx.get(f"{replica.address}/readyz", timeout=5).status_code == 200
        replica.signal(signal.SIGTERM)
        assert replica.proc.wait(20) == 0, replica.log()
    finally:
        replica.kill()
