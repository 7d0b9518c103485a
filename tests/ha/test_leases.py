"""Failover by lease, faster than the session timeout, between real processes.

Sessions here last 30 s; takeover happens after TAKEOVER seconds without a lease
renewal. Every contender issues checkpoint ids from one counter while it may act, and
logs them with its epoch, so each test can check that ids were never reused and that no
two leaders acted at once: sorted by id, the epochs never go down.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.ha import read_leader
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.support.processes import ContenderProcess, spawn_contender
from tests.support.waiting import wait_until

SESSION = 30.0
TAKEOVER = 1.5
RENEW = 0.25
JOB = "lease-job"


@pytest.fixture
def spawn(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[object]:
    procs: list[ContenderProcess] = []

    def _spawn(name: str, **kw: object) -> ContenderProcess:
        options: dict[str, object] = {
            "quorum": zk_server.connect_string,
            "cluster_id": cluster_id,
            "session_timeout": SESSION,
            "renew_interval": RENEW,
            "takeover_timeout": TAKEOVER,
            "job": JOB,
            **kw,
        }
        proc = spawn_contender(tmp_path, name, **options)  # type: ignore[arg-type]
        procs.append(proc)
        return proc

    yield _spawn
    for proc in procs:
        proc.kill()


def acting_leader(procs: list[ContenderProcess], timeout: float = 20) -> ContenderProcess:
    def find() -> ContenderProcess | None:
        acting = [p for p in procs if p.alive() and p.status().get("can_act")]
        return acting[0] if len(acting) == 1 else None

    return wait_until(find, timeout=timeout, message="exactly one acting leader")


def check_history(procs: list[ContenderProcess]) -> list[tuple[int, int]]:
    """No id twice; sorted by id the epochs never go down (no two leaders interleaved)."""
    issued = sorted(((cid, epoch) for p in procs for epoch, cid in p.issued()))
    ids = [cid for cid, _ in issued]
    assert len(ids) == len(set(ids)), "a checkpoint id was handed out twice"
    epochs = [epoch for _, epoch in issued]
    assert epochs == sorted(epochs), "an older leader issued an id after a newer one"
    return issued


def issues_more(proc: ContenderProcess, n: int = 3) -> None:
    before = len(proc.issued())
    wait_until(lambda: len(proc.issued()) >= before + n, timeout=20, message=f"{proc.name} issuing")


@pytest.mark.slow
def test_kill_9_fails_over_long_before_the_session_expires(spawn, observer) -> None:
    procs = [spawn(f"c{i}") for i in range(3)]
    old = acting_leader(procs)
    issues_more(old)
    old.signal(signal.SIGKILL)
    old.proc.wait(10)
    # The session would take 30 s to expire; the lease moves leadership in about TAKEOVER.
    new = acting_leader([p for p in procs if p is not old], timeout=SESSION / 3)
    issues_more(new)
    info = read_leader(observer)
    assert info is not None and info.instance_id == new.name
    check_history(procs)


@pytest.mark.slow
def test_sigterm_gives_up_the_lease_at_once(spawn, observer) -> None:
    procs = [spawn(f"c{i}") for i in range(2)]
    old = acting_leader(procs)
    old.signal(signal.SIGTERM)
    assert old.proc.wait(15) == 0
    new = acting_leader([p for p in procs if p is not old], timeout=TAKEOVER * 3)
    issues_more(new)
    check_history(procs)


@pytest.mark.slow
def test_zombie_paused_past_the_takeover_is_deposed_and_fenced(spawn, observer) -> None:
    procs = [spawn(f"c{i}") for i in range(2)]
    zombie = acting_leader(procs)
    issues_more(zombie)
    zombie_epoch = zombie.status()["epoch"]
    zombie.signal(signal.SIGSTOP)
    issued_before = zombie.issued()
    successor = acting_leader([p for p in procs if p is not zombie])
    issues_more(successor)
    # 3 x the takeover timeout in all; its session (30 s) is still alive when it wakes.
    time.sleep(max(0.0, 3 * TAKEOVER - TAKEOVER))  # the pause itself is what is tested
    zombie.signal(signal.SIGCONT)
    wait_until(
        lambda: zombie.status().get("state") == "follower" and zombie.status().get("demotions"),
        timeout=20,
        message="zombie stepped down",
    )
    status = zombie.status()
    assert status["demotions"][-1].startswith("fenced"), status["demotions"]
    assert status["fenced_writes"] >= 1
    assert zombie.issued() == issued_before, "the zombie issued an id after losing its lease"
    info = read_leader(observer)
    assert info is not None and info.instance_id == successor.name
    assert info.epoch > zombie_epoch
    check_history(procs)


@pytest.mark.slow
def test_pauses_under_the_takeover_change_nothing_over_it_fail_over_once(spawn, observer) -> None:
    procs = [spawn(f"c{i}") for i in range(2)]
    leader = acting_leader(procs)
    epoch = leader.status()["epoch"]
    for _ in range(3):  # well under the takeover timeout: no change of leadership
        leader.signal(signal.SIGSTOP)
        time.sleep(TAKEOVER / 3)  # the pause itself is what is tested
        leader.signal(signal.SIGCONT)
        issues_more(leader)
    assert leader.status()["epoch"] == epoch
    assert all(p.status().get("terms_won", 0) == (p is leader) for p in procs)

    for _ in range(2):  # well over it: exactly one failover per pause
        leader.signal(signal.SIGSTOP)
        successor = acting_leader([p for p in procs if p is not leader])
        time.sleep(TAKEOVER / 2)  # keep the old leader paused a little past the takeover
        leader.signal(signal.SIGCONT)
        wait_until(
            lambda old=leader: old.status().get("state") == "follower",
            timeout=20,
            message="stepped down",
        )
        issues_more(successor)
        epoch += 1
        assert successor.status()["epoch"] == epoch
        leader = successor
    check_history(procs)
