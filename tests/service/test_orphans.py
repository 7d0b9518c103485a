"""The leader's orphan collector, on real replica processes, a real ZooKeeper and real
files: what a killed leader leaves behind goes after the grace period; what is retained,
pending, a savepoint or not a ``chk-<n>`` directory never does; a dry run deletes
nothing; a follower deletes nothing. (``shared/``: test_shared_file_collection.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.support.waiting import wait_until

from .support import SPARKPOINT, Driver, ReplicaProcess, make_graph, wait_leader

JOB = "clicks"


def retained_ids(conn: ZooKeeperConnection) -> list[int]:
    return [p.checkpoint_id for p in ZooKeeperCompletedCheckpointStore(conn, JOB, None).recover()]


def settings(grace: str, interval: str, tmp_path: Path) -> dict[str, str]:
    return {
        "state.checkpoints.num-retained": "1",
        "state.checkpoints.orphan-cleanup.grace-period": grace,
        "execution.checkpointing.timeout": grace,  # no timeout may exceed the grace
        "state.checkpoints.orphan-cleanup.interval": interval,
        "state.savepoints.dir": str(tmp_path / "savepoints"),
    }


def state_file(directory: Path, size: int = 1000) -> Path:
    """A state file as a driver's task writes it into a checkpoint directory."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "count-0-0"
    path.write_bytes(b"s" * size)
    return path


def older_than(path: Path, seconds: float) -> bool:
    newest = max([path.stat().st_mtime, *(p.stat().st_mtime for p in path.iterdir())])
    return time.time() - newest > seconds


def last_changed_ago(path: Path, seconds: float) -> None:
    """Set the modification times of ``path`` and what is in it ``seconds`` back."""
    back = time.time() - seconds
    for entry in [*path.iterdir(), path]:
        os.utime(entry, (back, back))


def hold_one_trigger(driver: Driver) -> int:
    """Stop acknowledging; the id of the next checkpoint triggered (left pending)."""
    driver.acking.clear()
    return wait_until(
        lambda: driver.held[-1][1] if driver.held else None,
        timeout=90,
        message="a checkpoint triggered and held unacknowledged",
    )


def gc_cli(address: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SPARKPOINT, "checkpoints", "gc", "--coordinator", address, *flags],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_killed_leaders_orphans_go_after_the_grace_period_and_nothing_else_does(
    replicas, observer, tmp_path
) -> None:
    procs: list[ReplicaProcess] = [
        # A grace period (and so a timeout) the held checkpoint outlasts till the kill;
        # the directories are made older than it.
        replicas(f"r{i}", settings=settings("1 min", "100 ms", tmp_path))
        for i in range(2)
    ]
    old = wait_leader(procs, timeout=120)
    job_dir = tmp_path / "checkpoints" / JOB
    driver = Driver([p.address for p in procs], make_graph(JOB), interval_ms=300).start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=90, message="2 checkpoints")
        savepoint_id = driver.client.trigger_savepoint(JOB, None)
        wait_until(
            lambda: savepoint_id in driver.completed_ids(), timeout=90, message="a savepoint"
        )
        # Things the collector must never touch, older than the grace period. (shared/
        # has rules of its own: tests/service/test_shared_file_collection.py.)
        foreign = state_file(job_dir / "notes")
        above_counter = state_file(job_dir / "chk-999999")
        for path in (foreign.parent, above_counter.parent):
            last_changed_ago(path, 120)
        savepoints = list((tmp_path / "savepoints").glob("savepoint-*/_metadata"))
        assert len(savepoints) == 1

        held = hold_one_trigger(driver)
        orphan = job_dir / f"chk-{held}"
        state_file(orphan)
        last_changed_ago(orphan, 120)
        old_epoch = driver.completed[-1][0]
        old.signal(signal.SIGKILL)
        old.proc.wait(10)
        driver.acking.set()
        new = wait_leader([p for p in procs if p is not old], timeout=120)
        wait_until(
            lambda: any(e > old_epoch for e, _ in driver.completed),
            timeout=90,
            message="a checkpoint completed by the new leader",
        )
        wait_until(
            lambda: not orphan.exists(), timeout=90, message=f"{orphan} deleted by the new leader"
        )

        for checkpoint_id in retained_ids(observer):
            assert (job_dir / f"chk-{checkpoint_id}" / "_metadata").is_file()
        assert foreign.is_file() and above_counter.is_file()
        assert all(path.is_file() for path in savepoints)
        label = f'{{job_id="{JOB}"}}'
        assert new.metric(f"sparkpoint_orphan_checkpoint_directories_removed_total{label}") >= 1
        assert new.metric(f"sparkpoint_orphan_checkpoint_bytes_removed_total{label}") >= 1000
    finally:
        driver.stop()


@pytest.mark.slow
def test_dry_run_deletes_nothing_and_a_pending_checkpoint_survives(
    replicas, observer, tmp_path
) -> None:
    # The background collector waits an hour: only the command line collects here. The
    # grace period is a minute, so the held checkpoint (whose timeout cannot exceed it)
    # stays pending through both collections; the directories are made older than it.
    leader = replicas("r0", settings=settings("1 min", "1 h", tmp_path))
    wait_leader([leader], timeout=120)
    job_dir = tmp_path / "checkpoints" / JOB
    driver = Driver([leader.address], make_graph(JOB), interval_ms=300).start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=90, message="2 checkpoints")
        # Checkpoint 1 was subsumed; its directory back with a state file is a discard
        # that did not finish.
        orphan = job_dir / "chk-1"
        wait_until(lambda: not orphan.exists(), timeout=90, message="chk-1 discarded")
        state_file(orphan)
        pending = job_dir / f"chk-{hold_one_trigger(driver)}"
        state_file(pending)
        for directory in (orphan, pending):
            last_changed_ago(directory, 120)  # both older than the grace period

        dry = gc_cli(leader.address, "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        (job,) = json.loads(dry.stdout)["jobs"]
        assert [o["path"] for o in job["removed"]] == [str(orphan)]
        assert int(pending.name.removeprefix("chk-")) in job["pending"]
        assert orphan.is_dir() and pending.is_dir()

        real = gc_cli(leader.address)
        assert real.returncode == 0, real.stderr
        assert "deleted 1 directories" in real.stdout and str(orphan) in real.stdout
        assert not orphan.exists()
        assert (pending / "count-0-0").is_file(), "a checkpoint pending in this term survives"
        for checkpoint_id in retained_ids(observer):
            assert (job_dir / f"chk-{checkpoint_id}" / "_metadata").is_file()

        bad_job = gc_cli(leader.address, "--job", "nope")
        assert bad_job.returncode == 1 and "nope" in bad_job.stderr
    finally:
        driver.stop()
    leader.kill()
    refused = gc_cli(leader.address, "--dry-run")
    assert refused.returncode == 1
    assert "no leader" in refused.stderr and "nothing was deleted" in refused.stderr


@pytest.mark.slow
def test_a_follower_deletes_nothing(replicas, tmp_path) -> None:
    # The leader scans often but finds everything young; the follower would delete at
    # once — if it scanned.
    leader = replicas("r0", settings=settings("1 h", "100 ms", tmp_path))
    wait_leader([leader], timeout=120)
    follower = replicas("r1", settings=settings("100 ms", "100 ms", tmp_path))
    wait_until(lambda: follower.state() == "follower", timeout=120, message="r1 follows")
    job_dir = tmp_path / "checkpoints" / JOB
    driver = Driver([leader.address, follower.address], make_graph(JOB), interval_ms=300)
    driver.start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=90, message="2 checkpoints")
        orphan = job_dir / "chk-1"
        wait_until(lambda: not orphan.exists(), timeout=90, message="chk-1 discarded")
        state_file(orphan)
        scans = leader.metric("sparkpoint_orphan_scans_total")
        wait_until(
            lambda: (
                leader.metric("sparkpoint_orphan_scans_total") >= scans + 10
                and older_than(orphan, 0.5)
            ),
            timeout=90,
            message="ten scans by the leader since the orphan appeared",
        )
        assert orphan.is_dir()
        assert follower.metric("sparkpoint_orphan_scans_total") == 0
        asked = httpx.post(
            f"{follower.address}/v1/checkpoints/orphans", json={"dry_run": False}, timeout=10
        )
        assert asked.status_code == 307 and asked.headers["location"].startswith(leader.address)
        assert orphan.is_dir()

        # The same replica, once leader, collects it: the check above could fail.
        leader.signal(signal.SIGKILL)
        leader.proc.wait(10)
        wait_leader([follower], timeout=120)
        wait_until(lambda: not orphan.exists(), timeout=90, message="collected by r1 as leader")
    finally:
        driver.stop()
