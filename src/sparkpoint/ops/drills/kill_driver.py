"""``drill kill-driver``: kill -9 the pipeline's active Spark driver while a warm standby
driver waits, time the standby's takeover, check the invariants — N times.

Per iteration: a standby driver is started if none waits (``run_clicks --standby``: its
own SparkSession, warmed up), and the drill waits until the leader reports it ready (it
heartbeats as the job's standby) and a checkpoint completed since the last iteration.
Then the active driver's whole process group — the Python driver and its JVM — gets
SIGKILL, and the drill measures from the kill:

1. ``detection``: until the job's record in ZooKeeper names the standby's run as the
   current one (the leader granted it: its probe of the dead driver was refused, or the
   driver takeover timeout passed);
2. ``restore``: until the standby reports it restored the latest completed checkpoint
   (state, source offsets, the sink's pre-committed transactions) and runs;
3. ``first_checkpoint``: until a checkpoint newer than both the one it restored and every
   one completed before the kill completes — the first of the new run, when its sink's
   output becomes visible again.

Then the leader invariants (one acting leader, ids rising, no retained checkpoint lost)
and, over the whole run, that driver runs take turns completing checkpoints and that the
output is exactly-once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from sparkpoint.ops.drills.cluster import DrillError, Target
from sparkpoint.ops.drills.invariants import (
    Invariant,
    check_ids_rising,
    check_retained_kept,
    check_single_leader,
)
from sparkpoint.ops.drills.kill_leader import steady
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import DrillReport, IterationResult
from sparkpoint.ops.drills.workload import ClicksPipeline
from sparkpoint.store import ZooKeeperJobRegistry

# The drill shares the machine with what it measures: it looks often only where the
# figure depends on it (one ZooKeeper read), and seldom elsewhere.
POLL_S = 0.02
SLOW_POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class KillDriverOptions:
    iterations: int = 5
    interval_s: float = 2.0  # pause between iterations, once a standby waits again
    deadline_s: float = 90.0  # for each wait on the takeover
    # A standby starts a JVM and a SparkSession first: minutes on a loaded 2-core machine.
    standby_start_s: float = 300.0
    #: No standby: the killed driver is started again at once, cold (the comparison).
    cold: bool = False


def _poll(found: Callable[[], Any], timeout: float, what: str, every: float = POLL_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := found()) is not None:
            return value
        time.sleep(every)
    raise DrillError(f"timed out after {timeout:g} s waiting for {what}")


def standby_ready(addresses: list[str], job_id: str) -> bool:
    """The leader has the job's standby heartbeating (a takeover would find it warm).
    Every replica is asked: only the leader knows, the others answer from ZooKeeper."""
    for address in addresses:
        try:
            jobs = httpx.get(f"{address}/v1/jobs", timeout=1.0).json().get("jobs", [])
        except (httpx.HTTPError, ValueError):
            continue
        if any(j.get("job_id") == job_id and j.get("standby_ready") for j in jobs):
            return True
    return False


def run_kill_driver(
    target: Target,
    observer: ClusterObserver,
    options: KillDriverOptions,
    config: dict[str, object],
    progress: Callable[[IterationResult], None] | None = None,
) -> DrillReport:
    pipeline = target.workload
    if not isinstance(pipeline, ClicksPipeline):
        raise DrillError("kill-driver needs the demo pipeline (--local, --workload pipeline)")
    report = DrillReport("kill-driver", {
        **config, "signal": "KILL",
        "driver_takeover_timeout_s": target.settings.driver_takeover_timeout_s,
        "takeover": "cold restart" if options.cold else "warm standby",
    })  # fmt: skip
    registry = ZooKeeperJobRegistry(target.conn, None)
    job = pipeline.job_id
    pacing = threading.Event()  # only ever waited on with a timeout: the drill's own pace
    completions = 0
    for n in range(1, options.iterations + 1):
        if not options.cold:
            if pipeline.standby_proc is None or pipeline.standby_proc.poll() is not None:
                pipeline.start_standby()
            _poll(lambda: True if standby_ready(target.addresses(), job) else None,
                  options.standby_start_s, "the standby driver to wait, warm",
                  SLOW_POLL_S)  # fmt: skip
        before = steady(observer, completions, options.deadline_s)
        result = _iteration(n, pipeline, registry, observer, before, options)
        report.iterations.append(result)
        completions = len(observer.snapshot().completions)
        if progress is not None:
            progress(result)
        if n < options.iterations:
            pacing.wait(options.interval_s)
    return report


def _iteration(
    n: int,
    pipeline: ClicksPipeline,
    registry: ZooKeeperJobRegistry,
    observer: ClusterObserver,
    before: Observation,
    options: KillDriverOptions,
) -> IterationResult:
    record = registry.get(pipeline.job_id)
    assert record is not None and pipeline.proc is not None
    assert options.cold or pipeline.standby_proc is not None
    old_run, victim = record.run_id, pipeline.proc.pid
    max_before = max((cid for cid, _ in before.completions), default=0)
    first_sample = len(before.samples)

    killed_wall = time.time()
    killed = time.monotonic() - observer.started
    pipeline.kill()
    deadline = options.standby_start_s if options.cold else options.deadline_s
    if options.cold:
        # What a supervisor restarting the driver at once would get; the new run's
        # registration is its "grant".
        standby = pipeline.start_again().pid
    else:
        assert pipeline.standby_proc is not None
        standby = pipeline.standby_proc.pid

    def granted() -> float | None:
        now = registry.get(pipeline.job_id)
        return time.time() if now is not None and now.run_id not in ("", old_run) else None

    result = IterationResult(n, f"SIGKILL driver pid {victim}", old_epoch=before.leader_epoch)
    try:
        granted_wall = _poll(granted, deadline, "the standby to be granted the job")
        started = _poll(lambda: pipeline.report_of(standby, "started"), deadline,
                        "the standby to restore and start", 0.1)  # fmt: skip
    except DrillError as exc:
        result.invariants.append(Invariant("standby_took_over", False, str(exc)))
        return result
    if not options.cold:
        pipeline.promote()
    restored_from = int(started.get("restored_from") or 0)
    newer = max(restored_from, max_before)
    after = observer.wait_for(
        lambda o: o if _first_completion(o, newer, killed) is not None else None,
        options.deadline_s,
    )
    obs = after if isinstance(after, Observation) else observer.snapshot()
    ckpt_at = _first_completion(obs, newer, killed)
    new_record = registry.get(pipeline.job_id)
    result.time_to_checkpoint_s = None if ckpt_at is None else ckpt_at - killed
    result.new_epoch, result.new_leader = obs.leader_epoch, obs.leader_instance
    result.notes = {"old_run": old_run, "new_run": new_record.run_id if new_record else None,
                    "restored_from": restored_from}  # fmt: skip
    started_wall = float(started["time"])
    result.phases = {
        "detection": round(granted_wall - killed_wall, 3),
        "restore": round(max(started_wall - granted_wall, 0.0), 3),
        "first_checkpoint": None
        if ckpt_at is None
        else round(max(ckpt_at - killed - (started_wall - killed_wall), 0.0), 3),
    }
    result.invariants = [
        check_single_leader(obs.samples[first_sample:]),
        check_ids_rising([cid for cid, _ in obs.completions]),
        check_retained_kept(before.retained, obs.retained),
        Invariant(
            "standby_took_over",
            ckpt_at is not None,
            f"restored {restored_from}, completed a newer checkpoint"
            if ckpt_at is not None
            else f"no checkpoint newer than {newer} within {options.deadline_s:g} s",
        ),
    ]
    return result


def _first_completion(obs: Observation, newer_than: int, since: float) -> float | None:
    return next((at for cid, at in obs.completions if cid > newer_than and at >= since), None)
