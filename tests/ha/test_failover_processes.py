"""Failover between real contender processes, killed and paused with real signals.

Each contender, while it leads, issues checkpoint ids from one job's ZooKeeper counter,
so every test can also check that no id is ever handed out twice.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.counter.zookeeper import decode_count
from sparkpoint.ha import ZooKeeperConnection, list_contenders, read_leader
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.support.processes import ContenderProcess, spawn_contender
from tests.support.waiting import wait_until

JOB = "job-a"


@pytest.fixture
def spawn(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[object]:
    procs: list[ContenderProcess] = []

    def _spawn(name: str, session_timeout: float) -> ContenderProcess:
        proc = spawn_contender(
            tmp_path, name, quorum=zk_server.connect_string, cluster_id=cluster_id,
            session_timeout=session_timeout, job=JOB,
        )  # fmt: skip
        procs.append(proc)
        return proc

    yield _spawn
    for proc in procs:
        proc.kill()


def leader_of(procs: list[ContenderProcess]) -> ContenderProcess:
    def find() -> ContenderProcess | None:
        leading = [p for p in procs if p.alive() and p.status().get("state") == "leader"]
        return leading[0] if len(leading) == 1 else None

    return wait_until(find, timeout=30, message="exactly one leading contender")


def all_issued(procs: list[ContenderProcess]) -> list[int]:
    return [cid for p in procs for _, cid in p.issued()]


def counter_value(conn: ZooKeeperConnection) -> int:
    raw, _ = conn.client.get(conn.paths.counter(JOB))
    return decode_count(raw, JOB)


@pytest.mark.slow
def test_sigkill_leader_fails_over_after_session_expiry(spawn, observer) -> None:
    procs = [spawn(f"c{i}", 2.0) for i in range(3)]
    old = leader_of(procs)
    wait_until(lambda: len(old.issued()) >= 5, timeout=20, message="ids issued by the leader")
    old.signal(signal.SIGKILL)
    old.proc.wait(10)
    old_ids = [cid for _, cid in old.issued()]

    new = leader_of([p for p in procs if p is not old])
    wait_until(lambda: len(new.issued()) >= 5, timeout=20, message="ids issued by the new leader")
    assert new.status()["epoch"] > max(e for e, _ in old.issued())
    assert min(cid for _, cid in new.issued()) > max(old_ids)
    issued = all_issued(procs)
    assert len(issued) == len(set(issued)), "a checkpoint id was handed out twice"
    assert counter_value(observer) > max(issued)
    info = read_leader(observer)
    assert info is not None and info.instance_id == new.name


@pytest.mark.slow
def test_sigterm_hands_over_without_waiting_for_the_session_timeout(spawn, observer) -> None:
    # A 60 s session: waiting for its expiry would blow the 20 s deadline below.
    procs = [spawn(f"c{i}", 60.0) for i in range(2)]
    old = leader_of(procs)
    old.signal(signal.SIGTERM)
    assert old.proc.wait(15) == 0
    new = wait_until(
        lambda: (
            new
            if (new := next(p for p in procs if p is not old)).status().get("state") == "leader"
            else None
        ),
        timeout=20,
        message="handover within one election round",
    )
    assert read_leader(observer) is not None
    assert [c.instance_id for c in list_contenders(observer)] == [new.name]


@pytest.mark.slow
def test_zombie_leader_changes_nothing_after_resuming(spawn, observer) -> None:
    procs = [spawn(f"c{i}", 1.5) for i in range(2)]
    zombie = leader_of(procs)
    wait_until(lambda: len(zombie.issued()) >= 3, timeout=20, message="ids issued by the leader")
    zombie_epoch = zombie.status()["epoch"]
    zombie.signal(signal.SIGSTOP)
    issued_while_leading = zombie.issued()

    # Paused past its session timeout: the other contender takes over and issues ids.
    successor = leader_of([p for p in procs if p is not zombie])
    wait_until(lambda: len(successor.issued()) >= 3, timeout=20, message="successor issuing")
    successor_epoch = successor.status()["epoch"]
    assert successor_epoch > zombie_epoch

    zombie.signal(signal.SIGCONT)
    # It finds out, steps down and queues again (a new latch node of a new session)...
    wait_until(
        lambda: (s := zombie.status()).get("state") == "follower" and s.get("demotions"),
        timeout=20,
        message="zombie stepped down",
    )
    wait_until(
        lambda: zombie.name in [c.instance_id for c in list_contenders(observer)],
        timeout=20,
        message="zombie contends again",
    )
    status = zombie.status()
    # Whichever it noticed first (its renewal, or the session loss), it confirmed against
    # the epoch: a refused fenced write, counted.
    assert status["demotions"][-1].startswith("fenced"), status["demotions"]
    assert status["fenced_writes"] >= 1
    # ...and it changed nothing: no id issued after the pause, leader info is the successor's.
    assert zombie.issued() == issued_while_leading
    info = read_leader(observer)
    assert info is not None
    assert (info.instance_id, info.epoch) == (successor.name, successor_epoch)
    issued = all_issued(procs)
    assert len(issued) == len(set(issued)), "a checkpoint id was handed out twice"
    assert successor.status()["state"] == "leader"
