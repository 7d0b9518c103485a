"""Exactly-once with an executor JVM killed mid-run (Spark's local-cluster mode runs
real executor processes). The driver killed and restarted: see test_service.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.pipeline import processes
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_executor_killed_mid_epoch(tmp_path: Path, backend: str) -> None:
    # rocksdb: the lost executor's stores are rebuilt by Spark's lineage recomputation.
    driver = processes.start_driver(
        tmp_path, "--state-backend", backend, master="local-cluster[2,1,1024]"
    )
    wait_until(
        lambda: driver.latest().get("epoch", 0) >= 3,
        timeout=180,
        message="three epochs in local-cluster mode",
    )
    victims = processes.executor_pids(driver.proc.pid)
    assert len(victims) == 2, victims
    os.kill(victims[0], signal.SIGKILL)
    killed_at = driver.latest()["epoch"]
    assert driver.wait(timeout=300) == 0, driver.log.read_text()[-4000:]
    final = driver.latest()
    assert final.get("event") == "finished" and final["epoch"] > killed_at
    assert processes.committed(tmp_path / "out") == processes.expected()
