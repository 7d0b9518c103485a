"""A running pipeline rescaled live, in the same driver and SparkSession: 4 → 2 → 6 on both
state backends — the keyed clicks job, with the output exactly once and the final state
equal to the offline computation, and the event-time sessions job (windows, timers and
watermarks), whose sessions and late clicks equal the offline ones; each rescale planned
from the checkpoint it completed, the coordinator's graph and the next checkpoint at the
new parallelism; once through a rescale request stored with the job (the REST API's),
applied and reported by the driver. Bad parallelisms are refused. Real Spark, files and
coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.clicks import expected_state
from sparkpoint.examples.sessions import sessions_pipeline
from sparkpoint.pipeline import BackgroundChannel, EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.sinks.files import IN_PROGRESS_DIR
from sparkpoint.pipeline.state_processor.entries import read_state_entries
from sparkpoint.runs.errors import InvalidParallelismError
from sparkpoint.storage import CheckpointStorage
from tests.pipeline import support
from tests.pipeline.api.test_windows import assert_sessions_committed, clicks
from tests.support.waiting import wait_until


def parallelism_in(storage: CheckpointStorage, job_id: str, checkpoint_id: int) -> set[int]:
    """The parallelism of every operator in checkpoint ``checkpoint_id``."""
    metadata = storage.read_metadata(storage.checkpoint_directory(job_id, checkpoint_id))
    return {op.parallelism for op in metadata.operator_states.values()}


def graph_parallelism(channel: EmbeddedChannel) -> set[int]:
    """The parallelism of every operator of the graph the coordinator holds."""
    assert channel.coordinator is not None
    return {op.parallelism for op in channel.coordinator.graph.operators}


@pytest.mark.parametrize(
    ("backend", "background"), [("memory", False), ("rocksdb", False), ("memory", True)]
)
def test_live_rescale_4_2_6_is_exactly_once_and_ends_in_the_offline_state(
    spark: Any, tmp_path: Path, backend: str, background: bool
) -> None:
    """``background``: through a BackgroundChannel, whose thread heartbeats meanwhile, and
    the rescale to 2 asked of the job as the REST API asks it (a request stored with the
    job's record): the driver hears it with a heartbeat, rescales at the next epoch
    boundary and reports when, which the record then says."""
    job = f"live-{backend}"
    p = support.pipeline(job, tmp_path / "out", 4, records_per_epoch=150)
    p = p.with_state_backend(backend)
    storage = CheckpointStorage(str(tmp_path / "ckpt"))
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=support.MANUAL)
    wrapped = BackgroundChannel(channel, interval_s=0.01) if background else channel
    driver = PipelineDriver(p, spark, wrapped)
    assert driver.start() is None
    driver.run(max_epochs=2)

    if background:
        asked = channel.request_rescale(2)
        assert asked.state == "pending" and channel.rescale_request() == asked
        wait_until(
            lambda: driver.run_epoch() is not None and channel.rescale_request().state == "applied",
            timeout=120,
            message="the driver applies the request and reports it",
        )
        (down,) = driver.status.rescales
        applied = channel.rescale_request()
        assert (applied.request_id, applied.parallelism) == (asked.request_id, 2)
        assert (applied.epoch, applied.checkpoint_id) == (down.epoch, down.checkpoint_id)
        assert down.checkpoint_id in driver.status.completed
    else:
        down = driver.rescale(2)
        assert down.epoch == driver.status.epoch, "no epoch ran after the checkpoint"
        assert down.checkpoint_id == driver.status.completed[-1]
    assert (down.before, down.after) == (4, 2)
    assert parallelism_in(storage, job, down.checkpoint_id) == {4}
    assert graph_parallelism(channel) == {2}
    assert {op.parallelism for op in driver.graph.operators} == {2}
    assert driver.state is not None and driver.state.getNumPartitions() == 2
    driver.run(max_epochs=2)

    up = driver.rescale(6)
    assert (up.before, up.after, up.epoch) == (2, 6, driver.status.epoch)
    assert up.epoch > down.epoch
    assert parallelism_in(storage, job, up.checkpoint_id) == {2}, "taken at 2"
    assert graph_parallelism(channel) == {6}
    assert driver.status.rescales == [down, up]
    driver.run()
    last = driver.finish()
    driver.close()

    assert parallelism_in(storage, job, last) == {6}
    # Every key group is in exactly one subtask's state of the last checkpoint.
    pointer = storage.checkpoint_directory(job, last)
    keyed = storage.read_metadata(pointer).operator_states["process"].subtask_states
    owned = sorted(g for s in keyed.values() for h in s.keyed for g in h.key_group_range)
    assert owned == list(range(p.effective_max_parallelism))
    # Every record's output once, and nothing left in progress.
    assert support.committed(p) == support.expected()
    assert not list((tmp_path / "out" / IN_PROGRESS_DIR).glob("*.jsonl"))
    # The state of the last checkpoint (at 6) is the offline computation over all input.
    state = {(e.key, e.state): e.value for e in read_state_entries(pointer, "process")}
    offline = expected_state(support.source().all_records())
    assert {k: v for k, v in state.items() if k in offline} == offline
    assert {user for user, _ in state} == {user for user, _ in offline}


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_live_rescale_of_session_windows_4_2_6_matches_the_offline_sessions(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    out, late = tmp_path / "out", tmp_path / "late"
    p = sessions_pipeline(f"live-sessions-{backend}", clicks(), str(out), str(late))
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=support.MANUAL)
    driver = PipelineDriver(p.with_state_backend(backend), spark, channel)
    driver.start()
    driver.run(max_epochs=1)
    watermark = driver.status.watermark
    down = driver.rescale(2)
    assert driver.status.watermark is not None and driver.status.watermark >= (watermark or 0)
    driver.run(max_epochs=1)
    up = driver.rescale(6)
    assert [(r.before, r.after) for r in (down, up)] == [(4, 2), (2, 6)]
    driver.run()
    driver.finish()
    driver.close()

    assert_sessions_committed(out, late)


def test_rescale_to_a_parallelism_the_job_cannot_run_at_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    p = support.pipeline("live-bad", tmp_path / "out", 4)  # max parallelism 128
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=support.MANUAL)
    driver = PipelineDriver(p, spark, channel)
    driver.start()
    for bad in (0, -1, 129):
        with pytest.raises(ValueError, match=rf"parallelism {bad}: .*between 1 and .* 128"):
            driver.rescale(bad)
    with pytest.raises(TypeError, match="must be an int"):
        driver.rescale(2.0)  # type: ignore[arg-type]
    # So is a request (the REST API's); one for the parallelism it runs at changes nothing.
    with pytest.raises(InvalidParallelismError, match=r"between 1 and the job's max .* 128"):
        channel.request_rescale(129)
    assert channel.request_rescale(4).state == "unchanged"
    assert channel.rescale_request() is None
    # Refused before anything happened: no checkpoint, the graph unchanged.
    assert driver.status.acknowledged == [] and driver.status.rescales == []
    assert graph_parallelism(channel) == {4}
    driver.close()
