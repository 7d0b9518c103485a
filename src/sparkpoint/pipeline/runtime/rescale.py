"""Rescaling a running pipeline at an epoch boundary, in the same driver and SparkSession
(docs/pipeline.md, "Rescaling a running pipeline").

The driver completes a checkpoint and runs no epoch after it, so that checkpoint is
exactly the pipeline's state. Then it registers the job's graph at the new parallelism
(the coordinator holds the new graph from then on, and the run goes on under a new run
id) and asks for the restore plan of that checkpoint at the new parallelism: the same
plan a restarted driver gets — key groups to their new subtasks, operator state
redistributed by its mode, timers with their keys' key groups. Each keyed stage's state
RDD is loaded from it, on either backend, as a restore loads it.

What the driver itself holds — source offsets and event-time maxima, the watermark, the
sink's transactions — is not partitioned across subtasks and is, at this boundary,
exactly what the checkpoint holds, so it stays as it is (restoring it would re-run the
sink's restore, which fences and recommits, for nothing). The next checkpoint spreads it
over the new parallelism's subtasks.

This module works on the driver's own parts (split out of driver.py, which it belongs
to), as ``epoch_plan`` does for its Spark jobs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.runtime.epoch_plan import EpochPlan
from sparkpoint.pipeline.runtime.status import Rescaled
from sparkpoint.pipeline.state.tasks import StateTasks

if TYPE_CHECKING:
    from sparkpoint.pipeline.runtime.driver import PipelineDriver

log = logging.getLogger(__name__)


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    """A parallelism the job can run at: 1 to its max parallelism (the key groups)."""
    if isinstance(parallelism, bool) or not isinstance(parallelism, int):
        raise TypeError(f"parallelism must be an int, not {parallelism!r}")
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(
            f"cannot rescale to parallelism {parallelism}: it must be between 1 and the "
            f"job's max parallelism {max_parallelism} (its number of key groups)"
        )


def at_parallelism(pipeline: Pipeline, parallelism: int) -> Pipeline:
    """``pipeline`` at ``parallelism``, its max parallelism pinned: without an explicit
    one it is derived from the parallelism, and keyed state cannot change it."""
    return replace(
        pipeline,
        parallelism=parallelism,
        max_parallelism=pipeline.effective_max_parallelism,
    )


def state_tasks_of(pipeline: Pipeline, process_tag: str) -> list[StateTasks]:
    """Per keyed stage of ``pipeline``, the tasks of its state backend at its parallelism."""
    return [
        StateTasks(
            pipeline.state_backend,
            pipeline.job_id,
            process_tag,
            stage.uid,
            pipeline.parallelism,
            pipeline.effective_max_parallelism,
        )
        for stage in pipeline.keyed_stages
    ]


def rescale(driver: PipelineDriver, parallelism: int, timeout_s: float) -> Rescaled:
    """See :meth:`PipelineDriver.rescale`."""
    max_parallelism = driver.pipeline.effective_max_parallelism
    check_parallelism(parallelism, max_parallelism)
    if driver.stopped:
        raise RuntimeError(f"job {driver.graph.job_id}: the driver stopped; nothing to rescale")
    before = driver.pipeline.parallelism
    pipeline = at_parallelism(driver.pipeline, parallelism)
    pipeline.validate()
    graph = pipeline.job_graph()
    checkpoint_id = _checkpoint_at_boundary(driver, timeout_s)
    # The coordinator takes the new graph (a new run of the job, this driver's); its
    # checkpoints from now on expect the new parallelism's subtasks.
    driver.status.run_id = driver.channel.register(graph)
    restored = driver.channel.restore(graph)
    if restored is None or restored.checkpoint_id != checkpoint_id:
        raise RuntimeError(
            f"job {graph.job_id}: rescale to {parallelism} planned from checkpoint "
            f"{None if restored is None else restored.checkpoint_id}, not from "
            f"{checkpoint_id}, the one just completed"
        )
    # Triggers of the replaced coordinator: the new one triggers its own.
    driver._triggers.clear()
    old_plan = driver._plan
    driver.pipeline, driver.graph = pipeline, graph
    driver._p, driver._stages = parallelism, pipeline.keyed_stages
    # The same process tag: the on-disk backend's store server of this process goes on,
    # and each subtask's store is built again from the plan (restore at another
    # parallelism), never kept (its key groups changed).
    driver._state_tasks = state_tasks_of(pipeline, driver._process_tag)
    driver._plan = EpochPlan(driver.sc, pipeline, driver._state_tasks, old_plan.lineage_limit)
    driver._plan.restore_states(restored.plan, claimed=restored.claimed)
    for state in driver._plan.states:
        assert state is not None
        state.count()  # loaded now, while the checkpoint's files are the ones just written
    old_plan.cache.release_all()
    done = Rescaled(before, parallelism, driver.status.epoch, checkpoint_id)
    driver.status.rescales.append(done)
    log.info(
        "job %s rescaled %d → %d after epoch %d from checkpoint %d",
        graph.job_id, before, parallelism, done.epoch, checkpoint_id,
    )  # fmt: skip
    return done


def _checkpoint_at_boundary(driver: PipelineDriver, timeout_s: float) -> int:
    """Trigger a checkpoint, run epochs until it is taken, then only heartbeat (no epoch)
    until it completes: the state then is the checkpoint's. Returns its id."""
    checkpoint_id = driver.channel.trigger_checkpoint()
    deadline = time.monotonic() + timeout_s
    while checkpoint_id not in driver.status.completed:
        if driver.superseded:
            raise RuntimeError(f"rescale: {driver.status.superseded}")
        failed = [r for c, r in driver.status.aborted if c == checkpoint_id]
        failed += [r for c, r in driver.status.declined if c == checkpoint_id]
        if failed:
            raise RuntimeError(
                f"rescale: checkpoint {checkpoint_id} failed ({failed[0]}); the job goes on "
                f"at parallelism {driver.pipeline.parallelism}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"rescale: checkpoint {checkpoint_id} not complete in {timeout_s} s")
        if checkpoint_id in driver.status.acknowledged:
            driver.poll()
            time.sleep(0.02)  # waiting for the coordinator's completion notice
        elif not driver.run_epoch():
            time.sleep(0.02)
    return checkpoint_id
