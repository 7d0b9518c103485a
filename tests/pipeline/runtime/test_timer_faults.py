"""A timer fires exactly once across kill -9 (real ZooKeeper, real coordinator processes,
real driver processes): the sessions job — event-time session windows over out-of-order
clicks, some far too late — through the HA service, (a) with the coordinator leader
killed mid-run, (b) with the active driver killed and a warm standby taking over from the
on-disk (RocksDB) state. Every session is an event-time timer firing: a lost timer is a
missing session line, a timer fired twice a duplicate one. What the sinks committed must
be the sessions and late clicks computed offline, each exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline import processes
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # drivers, each starting Spark

JOB = "sessions"  # run_clicks's job id for --example sessions
#: Epochs that read records (the end of the input takes more, that fire what is open).
INPUT_EPOCHS = processes.PER_SPLIT * processes.SPLITS // processes.PER_EPOCH
#: Sessions committed before the kill, so timers fire on both sides of it: the first few
#: are of late clicks, the first sessions a gap closes come in the fourth epoch.
FIRED_BEFORE = 10


def sessions_committed(work: Path) -> bool:
    """A checkpoint completed after session windows closed by a gap fired."""
    return len(processes.committed(work / "out")) >= FIRED_BEFORE


def assert_each_fired_exactly_once(work: Path) -> None:
    sessions, late = processes.expected_sessions_lines()
    for name, expected in (("out", sessions), ("out-late", late)):
        faults = processes.exactly_once_faults(processes.committed(work / name), expected)
        assert not faults, f"{name}: {len(faults)} faults, first:\n" + "\n".join(faults[:10])


def test_leader_killed_mid_run_every_session_fires_exactly_once(
    tmp_path: Path, cluster: list[ReplicaProcess]
) -> None:
    work = tmp_path / "job"
    driver = processes.start_driver(
        work, "--coordinator", processes.addresses(cluster), example="sessions"
    )
    wait_until(
        lambda: sessions_committed(work),
        timeout=300,
        message="sessions fired and committed through the service",
    )
    leader = wait_leader(cluster)
    before = driver.latest()
    assert before["epoch"] < INPUT_EPOCHS, "the kill must come while sessions are open"
    leader.kill()  # kill -9
    assert driver.proc.poll() is None
    survivor = next(r for r in cluster if r is not leader)
    wait_until(
        lambda: (driver.latest().get("last_completed") or 0) > (before["last_completed"] or 0),
        timeout=180,
        message="checkpoints completing again after the failover",
    )
    assert driver.wait(timeout=300) == 0, driver.log.read_text()[-4000:]
    assert survivor.state() == "leader"
    starts = [r for r in driver.reports() if r.get("event") == "started"]
    assert len(starts) == 1 and starts[0]["restored_from"] is None  # never restarted
    assert driver.latest().get("event") == "finished"
    assert_each_fired_exactly_once(work)


def test_active_driver_killed_the_standby_fires_every_session_exactly_once(
    tmp_path: Path, cluster: list[ReplicaProcess], observer
) -> None:
    work = tmp_path / "job"
    args = ("--coordinator", processes.addresses(cluster), "--state-backend", "rocksdb")
    drivers = processes.active_and_standby(
        work, observer, JOB, *args, master="local-cluster[1,1,1024]", example="sessions",
        ready=lambda active: sessions_committed(work),
    )  # fmt: skip
    with drivers as (active, standby):
        before = active.latest()
        assert active.proc.poll() is None and before.get("event") is None
        assert before["epoch"] < INPUT_EPOCHS, "the kill must come while sessions are open"
        # Sessions fired before the checkpoint the standby restores are committed; the
        # timers still pending in it fire on the standby; what fired after it fires again.
        processes.kill_active_and_let_the_standby_finish(active, standby)
        assert_each_fired_exactly_once(work)


def test_the_check_fails_on_a_session_fired_twice_or_lost() -> None:
    sessions, late = processes.expected_sessions_lines()
    assert sessions and late
    assert processes.exactly_once_faults(reversed(sessions), sessions) == []
    twice = [*sessions, sessions[3]]
    assert processes.exactly_once_faults(twice, sessions) == [f"committed 2 times: {sessions[3]}"]
    assert processes.exactly_once_faults(sessions[1:], sessions) == [f"missing: {sessions[0]}"]
    made_up = sessions[0].replace('"clicks":', '"clicks":1')
    assert processes.exactly_once_faults([made_up, *sessions[1:]], sessions) == [
        f"missing: {sessions[0]}",
        f"not expected: {made_up}",
    ]
