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

A rescale asked of the job from outside (CLI, REST API, UI: a request stored with the
job's record, ``sparkpoint.runs.rescales``) reaches the driver as a :class:`RescaleTo`
with a heartbeat; :func:`apply_requested` runs it at the next epoch boundary and reports
it applied. A standby granted the job adopts the job's parallelism, or the pending
request's, before it restores (:func:`adopt_granted_parallelism`): the latest completed
checkpoint is exactly the state to go on from, at any parallelism.

This module works on the driver's own parts (split out of driver.py, which it belongs
to), as ``epoch_plan`` does for its Spark jobs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.channels.protocol import (
    RescaleTo,
    Restored,
    RunSuperseded,
    TriggerCheckpoint,
)
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
    driver._rescaling = True  # a request heard meanwhile waits (it is heard again)
    driver.status.rescaling = parallelism
    try:
        return _rescale(driver, parallelism, timeout_s)
    finally:
        driver._rescaling = False
        driver.status.rescaling = None


def _rescale(driver: PipelineDriver, parallelism: int, timeout_s: float) -> Rescaled:
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
    # Triggers of the replaced coordinator: the new one triggers its own. A rescale
    # instruction heard before the registration named the old graph's parallelism.
    driver._triggers.clear()
    driver._requested_rescale = None
    old_plan = _switch_to(driver, pipeline)
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


def _switch_to(driver: PipelineDriver, pipeline: Pipeline) -> EpochPlan:
    """Make ``pipeline`` (the driver's at another parallelism) the driver's, with a new
    epoch plan and state tasks (no state loaded yet); returns the old plan."""
    old_plan = driver._plan
    driver.pipeline, driver.graph = pipeline, pipeline.job_graph()
    driver._p, driver._stages = pipeline.parallelism, pipeline.keyed_stages
    # The same process tag: the on-disk backend's store server of this process goes on,
    # and each subtask's store is built again from the plan (restore at another
    # parallelism), never kept (its key groups changed).
    driver._state_tasks = state_tasks_of(pipeline, driver._process_tag)
    driver._plan = EpochPlan(driver.sc, pipeline, driver._state_tasks, old_plan.lineage_limit)
    return old_plan


def apply_requested(driver: PipelineDriver, timeout_s: float = 300.0) -> None:
    """Apply the rescale request a heartbeat carried (at an epoch boundary: called before
    an epoch) and report it applied. Already at its parallelism — a driver that took over
    from one that rescaled, or adopted it when granted — only reports. A rescale that
    fails leaves the request pending: the next heartbeat carries it again."""
    wanted, driver._requested_rescale = driver._requested_rescale, None
    if wanted is None or driver.stopped:
        return
    if wanted.parallelism != driver._p:
        try:
            rescale(driver, wanted.parallelism, timeout_s)
        except RunSuperseded as exc:
            driver._supersede(exc)
            return
        except (RuntimeError, TimeoutError) as exc:
            if driver.superseded:
                return
            log.warning("job %s: rescale to %d not applied (%s); the request stays pending",
                        driver.graph.job_id, wanted.parallelism, exc)  # fmt: skip
            return
    _report(driver, wanted)


def _report(driver: PipelineDriver, wanted: RescaleTo) -> None:
    """Tell the coordinator when ``wanted`` took effect: after the last rescale to its
    parallelism, or (none in this run) at the start, from the checkpoint restored."""
    last = next((r for r in reversed(driver.status.rescales) if r.after == wanted.parallelism),
                None)  # fmt: skip
    epoch = last.epoch if last else 0
    checkpoint_id = last.checkpoint_id if last else driver.status.restored_from
    reported = driver._reported_rescales.get(wanted.request_id)
    if reported is not None and time.monotonic() - reported < _REPORT_AGAIN_S:
        return
    driver._reported_rescales[wanted.request_id] = time.monotonic()
    report = getattr(driver.channel, "rescaled", None)
    if report is not None:
        report(wanted.request_id, epoch, checkpoint_id)


#: A request still pending this long after the driver reported it applied is reported
#: again (the report was lost with a leader).
_REPORT_AGAIN_S = 2.0


def adopt_granted_parallelism(driver: PipelineDriver) -> int | None:
    """A standby just granted the job: run at the parallelism the grant named (the job's
    graph's, or a pending request's) if it is not the standby's own, registering the job
    at it. Before the restore, which then plans the latest checkpoint at it. Returns the
    parallelism the standby was started with when it changed, else None."""
    named = [n for n in driver._granted_notices if isinstance(n, RescaleTo)]
    if not named or named[-1].parallelism == driver._p:
        return None
    wanted, before = named[-1], driver._p
    check_parallelism(wanted.parallelism, driver.pipeline.effective_max_parallelism)
    pipeline = at_parallelism(driver.pipeline, wanted.parallelism)
    pipeline.validate()
    _switch_to(driver, pipeline).cache.release_all()
    driver.status.run_id = driver.channel.register(driver.graph)
    # Triggers of the run the registration replaced are not this run's to take.
    driver._granted_notices = [
        n for n in driver._granted_notices if not isinstance(n, TriggerCheckpoint)
    ]
    log.info("job %s: granted standby runs at the job's parallelism %d (started at %d)",
             driver.graph.job_id, wanted.parallelism, before)  # fmt: skip
    return before


def note_adopted(driver: PipelineDriver, before: int | None, restored: Restored | None) -> None:
    """Record a standby's adoption (:func:`adopt_granted_parallelism`) as a rescale at the
    start, from the checkpoint it restored."""
    if before is not None and restored is not None:
        done = Rescaled(before, driver._p, driver.status.epoch, restored.checkpoint_id)
        driver.status.rescales.append(done)


def _checkpoint_at_boundary(driver: PipelineDriver, timeout_s: float) -> int:
    """Trigger a checkpoint, run epochs until it is taken, then only heartbeat (no epoch)
    until it completes: the state then is the checkpoint's. Returns its id.

    A checkpoint lost with a leader (its trigger, acknowledgement or completion notice)
    is replaced by the next one the coordinator triggers: once a newer trigger arrived
    and this one's is not waiting to be taken, the boundary is the newer one's."""
    checkpoint_id = driver.channel.trigger_checkpoint()
    deadline = time.monotonic() + timeout_s
    while checkpoint_id not in driver.status.completed:
        taken = checkpoint_id in driver.status.acknowledged
        queued = [t.checkpoint_id for t in driver._triggers]
        newer = [c for c in queued if c > checkpoint_id]
        if newer and checkpoint_id not in queued:
            log.info("rescale: checkpoint %d was lost; going on with checkpoint %d",
                     checkpoint_id, newer[0])  # fmt: skip
            checkpoint_id = newer[0]
            continue
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
        if taken and not newer:
            driver.poll()
            time.sleep(0.02)  # waiting for the coordinator's completion notice
        elif not driver.run_epoch():
            time.sleep(0.02)
    return checkpoint_id
