"""A restart never replays output a savepoint committed (the file sink, the embedded
coordinator): an intermediate savepoint commits nothing — its output commits with the
next checkpoint — and a driver that dies after its stop-with-savepoint committed restores
that savepoint, not the older checkpoint. The restarted driver never hands out an id a
savepoint used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint import CheckpointKind
from sparkpoint.examples.sessions import sessions_pipeline
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from tests.pipeline import support
from tests.pipeline.api.test_windows import assert_sessions_committed, clicks
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

JOB = "sp-restarts"


def new_process(spark: Any, work: Path) -> PipelineDriver:
    """The clicks job's driver as a fresh process makes it: a new channel, a new sink."""
    channel = EmbeddedChannel(
        str(work / "ckpt"), savepoint_dir=str(work / "sp"), interval_ms=support.MANUAL
    )
    return PipelineDriver(support.pipeline(JOB, work / "out", parallelism=2), spark, channel)


def savepoint_without_stop(driver: PipelineDriver) -> int:
    """Trigger a savepoint through the channel and run epochs until it completed."""
    cid = driver.channel.trigger_savepoint(None, stop=False)
    wait_until(
        lambda: driver.run_epoch() is not None and cid in driver.status.completed,
        timeout=120,
        message=f"savepoint {cid} completed",
    )
    return cid


def die(driver: PipelineDriver) -> None:
    """As kill -9 leaves it: nothing more of the driver runs, nothing is released."""
    driver.channel.close()


def run_to_the_end(driver: PipelineDriver) -> int:
    driver.run()
    last = driver.finish()
    driver.close()
    return last


def test_a_restart_after_a_savepoint_restores_the_checkpoint_before_and_commits_once(
    spark: Any, tmp_path: Path
) -> None:
    first = new_process(spark, tmp_path)
    first.start()
    first.run(max_epochs=2)
    checkpoint = first.finish()
    first.run(max_epochs=2)
    savepoint = savepoint_without_stop(first)
    assert savepoint > checkpoint
    die(first)

    second = new_process(spark, tmp_path)
    restored = second.start()
    assert restored is not None and restored.checkpoint_id == checkpoint
    last = run_to_the_end(second)
    assert support.committed(second.pipeline) == support.expected()
    assert not list((tmp_path / "out" / "_inprogress").iterdir())
    assert last > savepoint  # the savepoint's id is never handed out again


def test_a_savepoints_output_commits_with_the_next_checkpoint(spark: Any, tmp_path: Path) -> None:
    driver = new_process(spark, tmp_path)
    driver.start()
    driver.run(max_epochs=2)
    savepoint = savepoint_without_stop(driver)
    assert support.committed(driver.pipeline) == []  # a savepoint commits nothing
    # Two savepoints pending, then one checkpoint commits both, oldest first.
    driver.run(max_epochs=1)
    savepoint_without_stop(driver)
    assert support.committed(driver.pipeline) == []
    last = run_to_the_end(driver)
    assert last > savepoint
    assert support.committed(driver.pipeline) == support.expected()


def test_a_driver_dead_after_its_stop_with_savepoint_restarts_from_that_savepoint(
    spark: Any, tmp_path: Path
) -> None:
    first = new_process(spark, tmp_path)
    first.start()
    first.run(max_epochs=2)
    first.finish()
    first.run(max_epochs=2)
    savepoint_dir = first.stop_with_savepoint()
    assert first.stopped  # its output is committed: the job ends there
    die(first)

    second = new_process(spark, tmp_path)
    restored = second.start()
    assert restored is not None and restored.kind is CheckpointKind.SAVEPOINT
    assert Path(restored.metadata_uri.removeprefix("file://")).parent == Path(
        savepoint_dir.removeprefix("file://")
    )
    run_to_the_end(second)
    assert support.committed(second.pipeline) == support.expected()


def test_a_job_started_from_an_intermediate_savepoint_commits_its_output(
    spark: Any, tmp_path: Path
) -> None:
    first = new_process(spark, tmp_path)
    first.start()
    first.run(max_epochs=2)
    first.finish()
    at_checkpoint = len(support.committed(first.pipeline))
    first.run(max_epochs=2)
    savepoint_without_stop(first)
    assert len(support.committed(first.pipeline)) == at_checkpoint
    savepoint_dir = first.status.savepoints[max(first.status.savepoints)]
    die(first)

    second = PipelineDriver(
        support.pipeline(JOB, tmp_path / "out", parallelism=3),
        spark,
        EmbeddedChannel(str(tmp_path / "ckpt-2"), interval_ms=support.MANUAL),
        restore_from=savepoint_dir,
    )
    restored = second.start()
    assert restored is not None and restored.kind is CheckpointKind.SAVEPOINT
    # The savepoint's pending files are committed by the restore, before any epoch runs.
    assert len(support.committed(second.pipeline)) > at_checkpoint
    run_to_the_end(second)
    assert support.committed(second.pipeline) == support.expected()


def test_side_outputs_sinks_commit_a_savepoints_output_once_after_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    """The routed sink: the sessions job's main sink and its late-clicks side sink."""
    out, late = tmp_path / "out", tmp_path / "late"

    def process() -> PipelineDriver:
        channel = EmbeddedChannel(
            str(tmp_path / "ckpt"), savepoint_dir=str(tmp_path / "sp"), interval_ms=support.MANUAL
        )
        p = sessions_pipeline("sp-sessions", clicks(), str(out), str(late), parallelism=2)
        return PipelineDriver(p, spark, channel)

    first = process()
    first.start()
    first.run(max_epochs=2)
    first.finish()
    first.run(max_epochs=2)
    savepoint_without_stop(first)
    die(first)

    second = process()
    second.start()
    run_to_the_end(second)
    assert_sessions_committed(out, late)
