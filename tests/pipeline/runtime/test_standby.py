"""A warm standby driver takes over (real ZooKeeper, real coordinator processes, two real
driver processes with their own SparkSessions): the active driver is frozen with SIGSTOP
past the driver takeover timeout, the coordinator grants the job to the standby, which
restores the latest completed checkpoint and goes on; resumed, the old driver is refused
by the run-id fence and stops. The output stays exactly-once. And on the on-disk backend
with real executor JVMs (local-cluster): the active driver killed with kill -9, the
standby restores its RocksDB state and finishes; output and final state are those
computed offline."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.pipeline import processes
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # two drivers, each starting Spark

JOB = "clicks"


def test_frozen_active_driver_the_standby_takes_over_and_the_old_one_stops(
    tmp_path: Path, replicas, observer
) -> None:
    settings = {"driver.takeover-timeout": "3 s"}
    cluster: list[ReplicaProcess] = [replicas(n, settings=settings) for n in ("a", "b")]
    wait_leader(cluster, timeout=120)  # generous: the machine may be loaded
    addresses = processes.addresses(cluster)
    work = tmp_path / "job"
    drivers = processes.active_and_standby(work, observer, JOB, "--coordinator", addresses)
    with drivers as (active, standby):
        assert active.latest().get("event") is None, "the active run goes on meanwhile"

        active.signal(signal.SIGSTOP)  # frozen: no heartbeats past the takeover timeout
        try:
            wait_until(
                lambda: any(r.get("event") == "started" for r in standby.reports()),
                timeout=400,
                message="the standby is granted the job and restores",
            )
            started = next(r for r in standby.reports() if r.get("event") == "started")
            assert started["restored_from"] is not None and started["restored_from"] >= 1
            wait_until(
                lambda: (standby.latest().get("last_completed") or 0) > started["restored_from"],
                timeout=400,
                message="the standby completes a checkpoint of its own",
            )
        finally:
            active.signal(signal.SIGCONT)

        # Resumed, the old driver calls on with its run id: refused, it stops.
        assert active.wait(timeout=400) == 0, active.log.read_text()[-4000:]
        last = active.latest()
        assert last.get("event") == "superseded", last
        assert standby.wait(timeout=400) == 0, standby.log.read_text()[-4000:]
        assert standby.latest().get("event") == "finished"
        assert processes.committed(work / "out") == processes.expected()


def test_active_driver_killed_the_standby_restores_the_on_disk_state(
    tmp_path: Path, replicas, observer
) -> None:
    # Keyed state in RocksDB on the executors' disks (real executor JVMs): the standby
    # restores it from the incremental checkpoint's shared files.
    cluster: list[ReplicaProcess] = [replicas(n) for n in ("a", "b")]
    wait_leader(cluster, timeout=120)
    addresses = processes.addresses(cluster)
    work = tmp_path / "job"
    args = ("--coordinator", addresses, "--state-backend", "rocksdb")
    master = "local-cluster[1,1,1024]"
    drivers = processes.active_and_standby(work, observer, JOB, *args, master=master)
    with drivers as (active, standby):
        assert active.proc.poll() is None and active.latest().get("event") is None

        last = processes.kill_active_and_let_the_standby_finish(active, standby)
        assert processes.committed(work / "out") == processes.expected()
        chk = tmp_path / "checkpoints" / JOB / f"chk-{last['last_completed']}"
        assert processes.checkpointed_state(chk, tmp_path) == processes.expected_state()
