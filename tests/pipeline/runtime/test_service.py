"""Exactly-once through the HA coordinator service: real ZooKeeper, real coordinator
processes, a real driver process talking HTTP through the client."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.pipeline import processes
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_leader_killed_mid_run_the_pipeline_keeps_going(
    tmp_path: Path, cluster: list[ReplicaProcess], backend: str
) -> None:
    driver = processes.start_driver(
        tmp_path / "job", "--coordinator", processes.addresses(cluster), "--state-backend", backend
    )
    wait_until(
        lambda: (driver.latest().get("last_completed") or 0) >= 1,
        timeout=180,
        message="a checkpoint completed through the service",
    )
    leader = wait_leader(cluster)
    # The driver reports its progress with each heartbeat (the UI's Jobs page shows it).
    report = wait_until(
        lambda: (
            httpx.get(f"{leader.address}/v1/ui/progress", timeout=10).json()["jobs"].get("clicks")
        ),
        timeout=60,
        message="the driver's progress on the leader",
    )
    assert report["epoch"] >= 1 and report["records"] > 0 and report["source_lag"] is None
    before = driver.latest()
    leader.kill()  # kill -9
    survivor = next(r for r in cluster if r is not leader)
    wait_until(
        lambda: (driver.latest().get("last_completed") or 0) > before["last_completed"],
        timeout=180,
        message="checkpoints completing again after the failover",
    )
    assert driver.proc.poll() is None, "the driver must not have stopped"
    assert survivor.state() == "leader"
    assert driver.wait(timeout=300) == 0, driver.log.read_text()[-4000:]
    starts = [r for r in driver.reports() if r.get("event") == "started"]
    assert len(starts) == 1 and starts[0]["restored_from"] is None  # never restarted
    assert processes.committed(tmp_path / "job" / "out") == processes.expected()
    # The last checkpoint (taken after the whole input) holds the state computed offline.
    last = tmp_path / "checkpoints" / "clicks" / f"chk-{driver.latest()['last_completed']}"
    assert processes.checkpointed_state(last, tmp_path) == processes.expected_state()


def test_driver_killed_and_restarted_resumes_from_latest_checkpoint(
    tmp_path: Path, cluster: list[ReplicaProcess]
) -> None:
    work = tmp_path / "job"
    first = processes.start_driver(work, "--coordinator", processes.addresses(cluster))
    wait_until(
        lambda: (first.latest().get("last_completed") or 0) >= 2,
        timeout=180,
        message="two completed checkpoints",
    )
    first.kill()
    before = first.latest()
    assert before.get("event") != "finished"

    second = processes.start_driver(work, "--coordinator", processes.addresses(cluster))
    assert second.wait(timeout=300) == 0, second.log.read_text()[-4000:]
    started = [r for r in second.reports() if r.get("event") == "started"][-1]
    assert started["restored_from"] >= before["last_completed"]
    assert processes.committed(work / "out") == processes.expected()


def test_savepoint_at_4_restarted_at_2_and_at_7(
    tmp_path: Path, cluster: list[ReplicaProcess]
) -> None:
    addresses = processes.addresses(cluster)
    first = processes.start_driver(
        tmp_path / "p4", "--coordinator", addresses, "--savepoint-after-epochs", "3"
    )
    assert first.wait(timeout=300) == 0, first.log.read_text()[-4000:]
    savepoint = first.latest()["savepoint"]
    assert Path(savepoint, "_metadata").exists()
    before = processes.committed(tmp_path / "p4" / "out")
    assert 0 < len(before) < len(processes.expected())

    for parallelism in (2, 7):
        work = tmp_path / f"p{parallelism}"
        again = processes.start_driver(
            work, "--coordinator", addresses, "--restore-from", savepoint,
            "--parallelism", str(parallelism),
        )  # fmt: skip
        assert again.wait(timeout=300) == 0, again.log.read_text()[-4000:]
        assert again.reports()[0]["restored_from"] is not None
        after = processes.committed(work / "out")
        assert sorted(before + after) == processes.expected()
