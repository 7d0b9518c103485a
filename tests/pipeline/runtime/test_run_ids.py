"""Driver run ids from the pipeline's side: a driver whose run was superseded by a newer
run of the same job is refused, stops its loop and commits nothing more; the output stays
exactly-once. With the embedded coordinator (one process) and through the HA service (two
driver processes, the older frozen with SIGSTOP while the newer registers)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint import JobGraph, OperatorSpec, OperatorSubtaskState
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver, RunSuperseded
from tests.pipeline import processes, support
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

MANUAL = 3_600_000
#: Records per split of the process tests: 8 epochs per driver, two drivers each.
SHORT = 800


def test_embedded_channel_refuses_a_superseded_run(tmp_path: Path) -> None:
    graph = JobGraph("runs", (OperatorSpec("op", 1, 128),))
    older = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL)
    old_run = older.register(graph)
    cid = older.trigger_checkpoint()
    newer = older.another_run()
    new_run = newer.register(graph)
    assert new_run != old_run
    for call in (
        older.heartbeat,
        lambda: older.acknowledge(cid, [("op", 0, OperatorSubtaskState())]),
        lambda: older.decline(cid, "op", 0, "late"),
        older.trigger_checkpoint,
        lambda: older.restore(graph),
    ):
        with pytest.raises(RunSuperseded) as refused:
            call()
        assert old_run in str(refused.value) and new_run in str(refused.value)
    # The older run's checkpoint was aborted when the newer registered; the newer's own
    # checkpoint completes from its acknowledgement alone.
    assert any(getattr(n, "checkpoint_id", None) == cid for n in newer.heartbeat()) is False
    second = newer.trigger_checkpoint()
    assert newer.acknowledge(second, [("op", 0, OperatorSubtaskState())])
    assert newer.coordinator is not None
    assert newer.coordinator.to_dict()["counts"]["completed"] == 1  # type: ignore[index]
    newer.close()
    older.close()


def test_a_superseded_driver_stops_and_commits_nothing_more(spark: Any, tmp_path: Path) -> None:
    out, ckpt = tmp_path / "out", str(tmp_path / "ckpt")
    older_pipeline = support.pipeline("runs", out, 3)
    channel = EmbeddedChannel(ckpt, interval_ms=MANUAL)
    older = PipelineDriver(older_pipeline, spark, channel)
    older.start()
    older.run(max_epochs=1)
    done = channel.trigger_checkpoint()
    older.run(max_epochs=2)  # the snapshot after one epoch, its completion with the next
    assert older.status.completed == [done]
    channel.trigger_checkpoint()  # triggered for the older run; it never takes it

    # A newer run of the job starts while the older is still alive.
    newer_pipeline = support.pipeline("runs", out, 3)
    newer = PipelineDriver(newer_pipeline, spark, channel.another_run())
    restored = newer.start()
    assert restored is not None and restored.checkpoint_id == done
    committed = support.committed(older_pipeline)
    epochs = older.status.epoch

    older.run(max_epochs=3)  # the older goes on: its first heartbeat is refused
    assert older.superseded and older.stopped
    assert older.status.run_id and newer.status.run_id
    assert older.status.run_id in (older.status.superseded or "")
    assert newer.status.run_id in (older.status.superseded or "")
    assert older.status.epoch == epochs and older.status.completed == [done]
    assert support.committed(older_pipeline) == committed
    with pytest.raises(RunSuperseded):
        older.finish()

    newer.run()
    newer.finish()
    newer.close()
    older.close()
    assert support.committed(newer_pipeline) == support.expected()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two driver processes, each starting Spark
def test_a_frozen_driver_replaced_by_a_new_run_is_refused_and_stops(
    tmp_path: Path, replicas
) -> None:
    cluster: list[ReplicaProcess] = [replicas(name) for name in ("a", "b")]
    wait_leader(cluster, timeout=120)  # generous: the machine may be loaded
    addresses = ",".join(f"127.0.0.1:{r.port}" for r in cluster)
    work = tmp_path / "job"
    older = processes.start_driver(
        work, "--coordinator", addresses, progress_name="older", per_split=SHORT
    )
    drivers = [older]
    try:
        wait_until(
            lambda: (older.latest().get("last_completed") or 0) >= 1,
            timeout=400,
            message="the older run completes a checkpoint",
        )
        older.signal(signal.SIGSTOP)  # cut off: it holds whatever it was doing
        try:
            newer = processes.start_driver(
                work, "--coordinator", addresses, progress_name="newer", per_split=SHORT
            )
            drivers.append(newer)
            wait_until(
                lambda: (newer.latest().get("last_completed") or 0) >= 1,
                timeout=400,
                message="the newer run completes a checkpoint",
            )
        finally:
            older.signal(signal.SIGCONT)
        # Resumed, the older calls on with its run id: refused (409 naming both), it stops.
        assert older.wait(timeout=400) == 0, older.log.read_text()[-4000:]
        last = older.latest()
        assert last.get("event") == "superseded", last
        assert "superseded" in last["reason"]
        assert newer.wait(timeout=400) == 0, newer.log.read_text()[-4000:]
        assert newer.latest().get("event") == "finished"
        assert processes.committed(work / "out") == processes.expected(SHORT)
    finally:
        for driver in drivers:
            if driver.proc.poll() is None:
                driver.kill()
