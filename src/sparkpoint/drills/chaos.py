"""``drill chaos`` (local cluster only): N iterations, each with one fault picked at random
from a seeded generator — the same seed gives the same faults in the same order.

Faults:

- ``kill-9`` / ``sigterm``: the leader process killed, or asked to stop.
- ``sigstop``: the leader frozen for three takeover timeouts (a follower takes over
  meanwhile), then thawed: the zombie must be fenced.
- ``zookeeper-cut-off``: the leader's ZooKeeper traffic black-holed (through the fault
  proxies every local replica reaches ZooKeeper by), until another leader completed a
  checkpoint; then healed.
- ``zookeeper-replies-dropped``: ZooKeeper receives and applies the leader's requests, its
  replies are swallowed — writes whose outcome the leader cannot know; healed the same way.
- ``zookeeper-server-kill``: one ZooKeeper server of three killed (SIGKILL) until a
  checkpoint completes without it, then restarted.
- ``driver-kill``: the pipeline driver killed (SIGKILL, with its Spark JVM) and started
  again; it resumes from the latest completed checkpoint.
- ``stop-and-register``, ``rescale-in-flight``, ``slow-deletions``: the job ended and
  registered again, registered again at another parallelism with a checkpoint in flight,
  a leader deposed with deletions queued (:mod:`sparkpoint.drills.job_faults`).
- ``datanode-kill``, ``namenode-restart``: with the checkpoints on a local HDFS, a
  DataNode or the NameNode killed and started again
  (:mod:`sparkpoint.drills.hdfs_faults`).
- ``savepoint-then-driver-kill``, ``savepoint-then-leader-kill``: an intermediate
  savepoint, then at once the driver or the leader killed
  (:mod:`sparkpoint.drills.savepoint_faults`).
- ``second-job-from-checkpoint``, ``slow-ack``: a second job started from the drill
  job's checkpoint while the drill job goes on; the driver's acknowledgement held back
  beyond the orphan grace period (:mod:`sparkpoint.drills.shared_state_faults`).
- ``kafka-broker-restart``: with the Kafka workload, a broker restarted
  (:mod:`sparkpoint.drills.kafka_broker`).

After every iteration, besides the kill-leader drill's checks: completions as the drivers
heard them (each id once, with one pointer), the latest retained checkpoint loaded and
verified and a restore plan made from it, and no checkpoint directory older than the
grace period unless retained or pending — all read through the checkpoint storage, on
the local disk or on HDFS alike; and, with a pipeline whose output the drill can read
while it runs, no output line committed twice.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sparkpoint.devcluster.zookeeper import ZooKeeperLaunchError
from sparkpoint.drills import phases
from sparkpoint.drills.cluster import DrillError, LocalCluster, Target
from sparkpoint.drills.hdfs_faults import (
    DATANODE_KILL,
    NAMENODE_RESTART,
    datanode_kill,
    namenode_restart,
)
from sparkpoint.drills.invariants import (
    NO_STALE_DIRECTORIES,
    Invariant,
    check_completions_unique,
    check_ids_rising,
    check_latest_restorable,
    check_no_stale_directories,
    check_output_committed_once,
    check_retained_kept,
    check_single_leader,
)
from sparkpoint.drills.job_faults import (
    DRIVER_START_S,
    JOB_FAULTS,
    REREGISTRATIONS,
    next_completion,
    wait_for_queued_deletions,
)
from sparkpoint.drills.kafka_broker import KAFKA_BROKER_RESTART, kafka_broker_fault
from sparkpoint.drills.kill_leader import first_after, steady
from sparkpoint.drills.observer import ClusterObserver, Observation
from sparkpoint.drills.report import DrillReport, IterationResult
from sparkpoint.drills.savepoint_faults import (
    SAVEPOINT_DRIVER_KILL,
    SAVEPOINT_FAULTS,
    take_savepoint,
    wait_committed_after_restart,
)
from sparkpoint.drills.shared_state_faults import (
    SECOND_JOB,
    SHARED_STATE_FAULTS,
    SLOW_ACK,
    second_job_from_checkpoint,
    slow_ack,
)
from sparkpoint.drills.verification import (
    LEAK_MARGIN_S,
    checkpoint_directories,
    latest_restore_check,
    pending_ids,
)
from sparkpoint.drills.workload import DriverProcess, aborts, completions
from sparkpoint.ha import HAError
from sparkpoint.storage import StorageError

LEADER_FAULTS = ("kill-9", "sigterm", "sigstop", "zookeeper-cut-off",
                 "zookeeper-replies-dropped")  # fmt: skip
FAULTS = (
    *LEADER_FAULTS,
    "zookeeper-server-kill",
    "driver-kill",
    *JOB_FAULTS,
    *SAVEPOINT_FAULTS,
    *SHARED_STATE_FAULTS,
)
#: Faults on a service the job depends on, offered only when the job uses it: Kafka when
#: it reads Kafka, HDFS when its checkpoints live on a local HDFS.
DEPENDENCY_FAULTS = {KAFKA_BROKER_RESTART: kafka_broker_fault,
                     DATANODE_KILL: datanode_kill, NAMENODE_RESTART: namenode_restart}  # fmt: skip
#: Faults that need a pipeline driver process as the workload (the demo pipeline, or the
#: Kafka workload's orders job).
PIPELINE_FAULTS = ("driver-kill", "stop-and-register", "rescale-in-flight",
                   *SAVEPOINT_FAULTS, *SHARED_STATE_FAULTS)  # fmt: skip
#: Faults that need the demo pipeline itself (its generated input, its file sink).
CLICKS_FAULTS = (SECOND_JOB,)


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    iterations: int = 10
    seed: int = 1
    faults: tuple[str, ...] = FAULTS
    interval_s: float = 1.0
    deadline_s: float = 120.0
    # The collector's grace period: an orphan older than it, a scan interval and a margin
    # (for a loaded machine) counts as leaked.
    orphan_grace_s: float = 30.0  # also the checkpoint timeout (replicas.py)
    # Stop injecting once this much time has passed (the run then finishes as usual, its
    # report saying how many of the planned iterations ran); None: run them all.
    time_limit_s: float | None = None


def plan_faults(seed: int, iterations: int, faults: tuple[str, ...] = FAULTS) -> list[str]:
    """The faults of a run, in order: a function of the seed only."""
    known = (*FAULTS, *DEPENDENCY_FAULTS)
    unknown = sorted(set(faults) - set(known))
    if unknown or not faults:
        raise ValueError(f"unknown faults {unknown} (known: {', '.join(known)})")
    rng = random.Random(seed)
    return [rng.choice(faults) for _ in range(iterations)]


def run_chaos(
    target: Target,
    observer: ClusterObserver,
    options: ChaosOptions,
    config: dict[str, object],
    progress: Callable[[IterationResult], None] | None = None,
) -> DrillReport:
    if not isinstance(target, LocalCluster):
        raise DrillError("the chaos drill needs the local cluster (--local)")
    plan = plan_faults(options.seed, options.iterations, options.faults)
    report = DrillReport("chaos", {**config, "seed": options.seed, "faults": list(options.faults),
                                   "orphan_grace_s": options.orphan_grace_s,
                                   "leak_after_s": leak_after(options, target)})  # fmt: skip
    rng = random.Random(f"{options.seed}-servers")
    pacing = threading.Event()  # only ever waited on with a timeout: the drill's own pace
    completed = 0
    began = time.monotonic()
    report.config["planned_iterations"] = len(plan)
    for n, fault in enumerate(plan, start=1):
        if options.time_limit_s is not None and time.monotonic() - began > options.time_limit_s:
            report.config["stopped_by_time_limit_s"] = options.time_limit_s
            break
        try:
            before = steady(observer, completed, options.deadline_s)
        except DrillError as exc:
            if n == 1:
                raise  # never steady at all: the drill could not run
            # The last fault left the cluster unable to checkpoint: that is the finding.
            stuck = IterationResult(n, f"{fault} (not injected)")
            stuck.invariants.append(Invariant("cluster_steady_again", False, str(exc)))
            report.iterations.append(stuck)
            break
        notices_before = len(target.workload.notices())
        result = _inject(target, observer, options, n, fault, before, rng)
        obs = observer.snapshot()
        result.invariants += [
            check_single_leader(obs.samples[len(before.samples):]),
            check_ids_rising([cid for cid, _ in obs.completions]),
            check_retained_kept(before.retained, obs.retained),
            *_storage_checks(target, observer, options),
            *_output_checks(target),
        ]  # fmt: skip
        heard = target.workload.notices()
        new_aborts = aborts(heard[notices_before:])
        result.notes["fault"] = fault
        result.notes["aborted_checkpoints"] = [
            {"id": a.get("checkpoint_id"), "reason": a.get("reason")} for a in new_aborts
        ]
        report.iterations.append(result)
        completed = len(obs.completions)
        if progress is not None:
            progress(result)
        if n < len(plan):
            pacing.wait(options.interval_s)
    return report


def _inject(
    target: LocalCluster,
    observer: ClusterObserver,
    options: ChaosOptions,
    n: int,
    fault: str,
    before: Observation,
    rng: random.Random,
) -> IterationResult:
    if fault in LEADER_FAULTS:
        return _leader_fault(target, observer, options, n, fault, before)
    if fault in (*SAVEPOINT_FAULTS, *SHARED_STATE_FAULTS, *REREGISTRATIONS):
        return _job_fault(target, observer, options, n, fault, before)
    if fault in DEPENDENCY_FAULTS:
        return DEPENDENCY_FAULTS[fault](target, observer, options.deadline_s, n, before, rng)
    if fault == "zookeeper-server-kill":
        return _server_fault(target, observer, options, n, before, rng.randint(1, 3))
    if fault == "slow-deletions":
        assert before.leader_instance is not None
        queued = wait_for_queued_deletions(target, before.leader_instance, options.deadline_s)
        result = _leader_fault(target, observer, options, n, "sigstop", before)
        result.action = f"slow-deletions: {result.action} with deletions queued"
        result.notes["deletions_queued"] = queued
        return result
    return _driver_fault(target, observer, options, n, before)


def _storage_checks(
    target: LocalCluster, observer: ClusterObserver, options: ChaosOptions
) -> list[Invariant]:
    job_id = target.workload.job_id
    out = [check_completions_unique(completions(target.workload.notices()))]
    try:
        out.append(check_latest_restorable(latest_restore_check(target.conn, job_id)))
    except HAError as exc:
        out.append(Invariant("latest_checkpoint_restorable", False, f"cannot read: {exc}"))
    pending = pending_ids(target.addresses(), job_id)
    obs = observer.snapshot()
    now_s = time.monotonic() - observer.started
    unretained = {cid: now_s - at for cid, at in obs.retained_last_seen.items()}
    try:
        directories = checkpoint_directories(target.checkpoint_dir, job_id)
    except StorageError as exc:
        out.append(Invariant(NO_STALE_DIRECTORIES, False,
                             f"cannot list {target.checkpoint_dir}: {exc}"))  # fmt: skip
        return out
    out.append(check_no_stale_directories(
        directories, obs.retained, pending if pending is not None else set(),
        leak_after(options, target), unretained))  # fmt: skip
    return out


def _output_checks(target: LocalCluster) -> list[Invariant]:
    lines = target.workload.committed_lines() if isinstance(target.workload, DriverProcess) \
        else None  # fmt: skip
    return [] if lines is None else [check_output_committed_once(lines)]


def _job_fault(
    target: LocalCluster,
    observer: ClusterObserver,
    options: ChaosOptions,
    n: int,
    fault: str,
    before: Observation,
) -> IterationResult:
    """The faults on the job: registered again, savepoints amid kills, another job
    started from its checkpoint, an acknowledgement slower than the grace period."""
    if fault in REREGISTRATIONS:
        return REREGISTRATIONS[fault](target, observer, options.deadline_s, n, before)
    scan_s = target.settings.orphan_scan_interval_s or options.orphan_grace_s / 6
    if fault == SECOND_JOB:
        return second_job_from_checkpoint(target, observer, options.deadline_s, n, before,
                                          settle_s=options.orphan_grace_s + 2 * scan_s)  # fmt: skip
    if fault == SLOW_ACK:
        return slow_ack(target, observer, options.deadline_s, n, before, options.orphan_grace_s,
                        hold_s=options.orphan_grace_s + 2 * scan_s + 1.0)  # fmt: skip
    pipeline = target.workload
    if not isinstance(pipeline, DriverProcess):
        raise DrillError(f"{fault} needs a pipeline driver (--workload pipeline or kafka)")
    savepoint = take_savepoint(target, pipeline, options.deadline_s)
    if fault == SAVEPOINT_DRIVER_KILL:
        result = _driver_fault(target, observer, options, n, before)
        result.notes["committed_after_restart"] = wait_committed_after_restart(
            pipeline, options.deadline_s)  # fmt: skip
    else:
        result = _leader_fault(target, observer, options, n, "kill-9", before)
    result.action = f"{fault}: {savepoint.describe()}, then {result.action}"
    result.notes["savepoint"] = {"id": savepoint.checkpoint_id, "outcome": savepoint.outcome}
    return result


def leak_after(options: ChaosOptions, target: Target) -> float:
    interval = target.settings.orphan_scan_interval_s or options.orphan_grace_s / 6
    return options.orphan_grace_s + interval + LEAK_MARGIN_S


def _leader_fault(
    target: LocalCluster,
    observer: ClusterObserver,
    options: ChaosOptions,
    n: int,
    fault: str,
    before: Observation,
) -> IterationResult:
    victim, epoch = before.leader_instance, before.leader_epoch
    assert victim is not None and epoch is not None
    max_before = max((cid for cid, _ in before.completions), default=0)
    t0 = time.monotonic() - observer.started
    link = target.zookeeper_link(victim) if fault.startswith("zookeeper-") else None
    if fault == "kill-9":
        target.signal(victim, signal.SIGKILL)
    elif fault == "sigterm":
        target.signal(victim, signal.SIGTERM)
    elif fault == "sigstop":
        target.signal(victim, signal.SIGSTOP)
        threading.Event().wait(3 * target.settings.takeover_timeout_s)  # the fault itself
        target.signal(victim, signal.SIGCONT)
    elif fault == "zookeeper-cut-off":
        assert link is not None
        link.black_hole()
    else:
        assert link is not None
        link.drop()
    try:
        found = observer.wait_for(
            lambda o: o if first_after(o, epoch, max_before, t0)[2] is not None else None,
            options.deadline_s,
        )
    finally:
        if link is not None:
            link.heal()
    obs = found if isinstance(found, Observation) else observer.snapshot()
    leader_at, new_epoch, ckpt_at = first_after(obs, epoch, max_before, t0)
    result = IterationResult(
        n, f"{fault} {victim}",
        time_to_leader_s=None if leader_at is None else leader_at - t0,
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=epoch, new_epoch=new_epoch, new_leader=obs.leader_instance,
    )  # fmt: skip
    result.phases = phases.measure(target, observer, obs, t0, leader_at, max_before)
    if ckpt_at is None:
        result.invariants.append(Invariant(
            "failover_completed", False,
            f"no new leader and checkpoint within {options.deadline_s:g} s"))  # fmt: skip
    result.invariants.append(_rejoined(target, victim, options.deadline_s))
    return result


def _rejoined(target: LocalCluster, victim: str, deadline_s: float) -> Invariant:
    """The old leader (restarted if it exited) is back as a ready follower."""
    try:
        target.restart(victim, deadline_s)
    except DrillError as exc:
        return Invariant("old_leader_rejoined", False, str(exc))
    return Invariant("old_leader_rejoined", True, f"{victim} is a ready follower")


def _server_fault(
    target: LocalCluster,
    observer: ClusterObserver,
    options: ChaosOptions,
    n: int,
    before: Observation,
    server: int,
) -> IterationResult:
    max_before = max((cid for cid, _ in before.completions), default=0)
    t0 = time.monotonic() - observer.started
    target.zk.stop_server(server, signal.SIGKILL)
    try:
        ckpt_at = next_completion(observer, max_before, t0, options.deadline_s)
    finally:
        target.zk.start_server(server)
    obs = observer.snapshot()
    result = IterationResult(
        n, f"zookeeper-server-kill server {server} of 3",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance,
    )  # fmt: skip
    result.invariants.append(Invariant(
        "checkpoints_go_on", ckpt_at is not None,
        "completed with 2 of 3 servers" if ckpt_at is not None
        else f"nothing completed within {options.deadline_s:g} s with 2 of 3 servers"))  # fmt: skip
    try:
        target.zk.wait_serving(timeout=options.deadline_s)
        back = Invariant("zookeeper_server_rejoined", True, f"server {server} serving")
    except ZooKeeperLaunchError as exc:
        back = Invariant("zookeeper_server_rejoined", False, str(exc))
    result.invariants.append(back)
    return result


def _driver_fault(
    target: LocalCluster,
    observer: ClusterObserver,
    options: ChaosOptions,
    n: int,
    before: Observation,
) -> IterationResult:
    pipeline = target.workload
    if not isinstance(pipeline, DriverProcess):
        raise DrillError("driver-kill needs a pipeline driver (--workload pipeline or kafka)")
    max_before = max((cid for cid, _ in before.completions), default=0)
    t0 = time.monotonic() - observer.started
    pipeline.kill()
    started = pipeline.restart(max(options.deadline_s, DRIVER_START_S))
    restarted_at = time.monotonic() - observer.started
    ckpt_at = (next_completion(observer, max_before, restarted_at, options.deadline_s)
               if started else None)  # fmt: skip
    obs = observer.snapshot()
    result = IterationResult(
        n, "driver-kill",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance,
        notes={"driver_restart_s": round(restarted_at - t0, 3)},
    )  # fmt: skip
    result.invariants.append(Invariant(
        "driver_resumed", ckpt_at is not None,
        f"restarted in {restarted_at - t0:.1f} s, checkpointing again" if ckpt_at is not None
        else "the restarted driver did not start" if not started
        else f"no checkpoint within {options.deadline_s:g} s of the restart"))  # fmt: skip
    return result
