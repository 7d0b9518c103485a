"""The chaos drill's faults on state files that outlive one job or one acknowledgement.

- ``second-job-from-checkpoint``: the drill job's driver is killed (so that its latest
  retained checkpoint stays while another driver starts) and a second job is started
  from that checkpoint (with RocksDB, an incremental one: the second job's checkpoints
  may reference the drill job's shared files); the drill job goes on from the same
  checkpoint — registered again at another parallelism — while the second job completes
  a checkpoint of its own, and the second job's driver is killed there (its first
  checkpoint is the one that references the drill job's files; later ones, after
  compactions, may not). The drill job checkpoints on until its collector has run past
  the grace period. Every shared file a retained checkpoint of either job references
  must be there; the second job, started again, must restore from its own retained
  checkpoint. It is then left registered without a driver, so its checkpoints keep
  referencing what they reference for the rest of the drill (the end-of-run check of
  shared files covers every job). Before the second job starts, a probe job asks for a
  restore plan *claiming* that checkpoint: it must be refused, naming both jobs (only
  ``no-claim`` — the second job's mode — may use another job's checkpoint).
- ``slow-ack``: the driver is frozen (SIGSTOP of its process group: the Python driver,
  its JVM and its Python workers) once a checkpoint is in flight and, with RocksDB, the
  first of its new shared files is written — one subtask's upload done, the others'
  (tasks run one at a time) and the acknowledgement still to come — and thawed after the
  orphan grace period, two scans and a second. ``held_pending`` in the iteration's notes
  names the checkpoints still unacknowledged when it froze (empty: the race was lost,
  the acknowledgement had gone). The checkpoint that completes must not reference a
  missing shared file. Before, a job registering a checkpoint timeout above the grace
  period must be refused with a clear error: that is what lets a collector trust its
  grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import replace

from sparkpoint.checkpoint import JobGraph, OperatorSpec
from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.drills.cluster import DrillError, LocalCluster
from sparkpoint.drills.invariants import (
    CLAIM_OF_OTHER_JOB_REFUSED,
    SHARED_FILES_EXIST,
    Invariant,
    RequestOutcome,
    check_claim_of_other_job_refused,
    check_restored_own_checkpoint,
    check_shared_files_exist,
    check_timeout_above_grace_refused,
)
from sparkpoint.drills.job_faults import DRIVER_START_S, next_completion, poll_until
from sparkpoint.drills.observer import ClusterObserver, Observation
from sparkpoint.drills.report import IterationResult
from sparkpoint.drills.verification import (
    jobs_shared_files_report,
    pending_ids,
    retained_pointers,
)
from sparkpoint.drills.workload import (
    ClicksPipeline,
    DriverProcess,
    completions,
    last_log_line,
    wait_started,
)
from sparkpoint.ha import HAError
from sparkpoint.metadata import MetadataError
from sparkpoint.storage import StorageError, filesystem_for
from sparkpoint.storage.shared_files import list_shared_files, shared_directory
from sparkpoint.storage.uri import parse
from sparkpoint.store import ZooKeeperJobRegistry

SECOND_JOB = "second-job-from-checkpoint"
SLOW_ACK = "slow-ack"
SHARED_STATE_FAULTS = (SECOND_JOB, SLOW_ACK)
#: Arguments of the second job's first start besides ``--restore-from``: how it may use
#: the files of the checkpoint it starts from — ``no-claim``, the only mode allowed for
#: another job's checkpoint (``claim`` is probed over REST, see
#: :func:`claim_of_other_job_refused`).
SECOND_JOB_RESTORE_ARGS: tuple[str, ...] = ("--restore-mode", "no-claim")
#: The probe job registered (and cancelled) to see a timeout above the grace refused.
TIMEOUT_PROBE_JOB = "drill-timeout-probe"
#: The probe job registered (and cancelled) to see a claim of another job's checkpoint
#: refused.
CLAIM_PROBE_JOB = "drill-claim-probe"


def shared_files_exist(target: LocalCluster, grace_s: float) -> Invariant:
    """Every shared file a retained checkpoint of any of the drill's jobs references."""
    try:
        report = jobs_shared_files_report(target.conn, target.checkpoint_dir, target.job_ids(),
                                          grace_s)  # fmt: skip
    except (HAError, StorageError, MetadataError) as exc:
        return Invariant(SHARED_FILES_EXIST, False, f"cannot read: {exc}")
    return check_shared_files_exist(report)


def _own_completions(driver: DriverProcess, above: int = 0) -> list[int]:
    return [c.checkpoint_id for c in completions(driver.notices()) if c.checkpoint_id > above]


def second_job_from_checkpoint(
    target: LocalCluster,
    observer: ClusterObserver,
    deadline_s: float,
    n: int,
    before: Observation,
    settle_s: float,
) -> IterationResult:
    """``settle_s``: how long the drill job goes on after its rescale — the collector's
    grace period and a couple of scans."""
    pipeline = target.workload
    if not isinstance(pipeline, ClicksPipeline):
        raise DrillError(f"{SECOND_JOB} needs the demo pipeline (--workload pipeline)")
    t0 = time.monotonic() - observer.started
    # The drill job's driver is killed first: its latest checkpoint then stays retained
    # (nothing subsumes it) while the second driver starts its JVM and reads it.
    pipeline.kill()
    latest = max(retained_pointers(target.conn, pipeline.job_id),
                 key=lambda p: p.checkpoint_id, default=None)  # fmt: skip
    if latest is None:
        pipeline.restart(DRIVER_START_S)
        return IterationResult(n, f"{SECOND_JOB} (not injected: nothing retained)")
    source_dir = str(parse(latest.metadata_uri).parent)
    claim_refused = claim_of_other_job_refused(target, pipeline.job_id, source_dir)
    second = replace(pipeline, directory=target.directory / f"second-{n}", proc=None,
                     standby_proc=None, job_id=f"{pipeline.job_id}-second-{n}")  # fmt: skip
    target.other_drivers.append(second)
    invariants: list[Invariant] = [claim_refused]
    started = second.restart(DRIVER_START_S, "--restore-from", source_dir,
                             *SECOND_JOB_RESTORE_ARGS)  # fmt: skip
    # The drill job goes on, from the same checkpoint, at another parallelism (its
    # restore writes new files) while the second job completes its first checkpoint;
    # then it checkpoints on until its collector has run past the grace period.
    max_before = max((cid for cid, _ in observer.snapshot().completions), default=0)
    old, pipeline.parallelism = pipeline.parallelism, 3 if pipeline.parallelism == 2 else 2
    runs = sum(r.get("event") == "started" for r in pipeline.reports()) + 1
    pipeline.start_again()
    own = started and poll_until(lambda: _own_completions(second), deadline_s)
    # Stopped at its first checkpoint: the one that references the drill job's files
    # (a later one, after compactions, may reference only its own).
    second.kill()
    resumed = wait_started(pipeline, DRIVER_START_S, runs)
    resumed_at = time.monotonic() - observer.started
    invariants.append(Invariant(
        "second_job_checkpointed", bool(own),
        f"{second.job_id} started from checkpoint {latest.checkpoint_id} and completed "
        f"{_own_completions(second)[:1]}" if own
        else f"{second.job_id} did not start (see {second.directory})" if not started
        else f"{second.job_id} completed nothing within {deadline_s:g} s"))  # fmt: skip
    # Its first checkpoint subsumes the one both jobs started from: the files only that
    # one named are unreferenced by the drill job from then on, and collected a grace
    # period (and a scan) later — the check comes after a completion past that.
    first_at = next_completion(observer, max_before, resumed_at, deadline_s) if resumed else None
    ckpt_at = None
    if first_at is not None:
        ckpt_at = next_completion(observer, max_before, first_at + settle_s, deadline_s + settle_s)
    invariants.append(Invariant(
        "rescaled_driver_resumed", ckpt_at is not None,
        f"{old} -> {pipeline.parallelism}, checkpointing {settle_s:g} s later"
        if ckpt_at is not None else "the rescaled driver did not start" if not resumed
        else f"no checkpoint within {deadline_s:g} s of the grace period"))  # fmt: skip
    invariants.append(shared_files_exist(target, settle_s))
    if own:
        invariants.append(_restart_second(target, second, deadline_s))
        second.kill()  # registered, without a driver: its checkpoints stay retained
    obs = observer.snapshot()
    return IterationResult(
        n, f"{SECOND_JOB} {latest.checkpoint_id} -> {second.job_id}",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance, invariants=invariants,
        notes={"restored_from": source_dir, "restore_args": list(SECOND_JOB_RESTORE_ARGS)},
    )  # fmt: skip


def claim_of_other_job_refused(target: LocalCluster, owner: str, checkpoint_dir: str) -> Invariant:
    """Ask the leader for a restore plan claiming ``owner``'s checkpoint for a probe job
    of the same graph; the probe is cancelled again whatever the answer."""
    record = ZooKeeperJobRegistry(target.conn, None).get(owner)
    if record is None:
        return Invariant(CLAIM_OF_OTHER_JOB_REFUSED, False, f"job {owner} is not registered")
    graph = JobGraph(CLAIM_PROBE_JOB, record.graph.operators)
    with CoordinatorClient(target.addresses(), timeout_s=10.0, retry_for_s=60.0) as client:
        try:
            client.register_job(graph, {"interval_ms": 3_600_000})
            try:
                client.restore_plan(CLAIM_PROBE_JOB, graph, pointer=checkpoint_dir,
                                    restore_mode="claim")  # fmt: skip
                outcome = RequestOutcome(None)
            except ClientError as exc:
                outcome = RequestOutcome(exc.status, exc.message)
        finally:
            with contextlib.suppress(ClientError):
                client.cancel_job(CLAIM_PROBE_JOB)
    return check_claim_of_other_job_refused(outcome, CLAIM_PROBE_JOB, owner)


def _restart_second(target: LocalCluster, second: ClicksPipeline, deadline_s: float) -> Invariant:
    """Start the second job's driver again: from its own retained checkpoint."""
    retained = max((p.checkpoint_id for p in retained_pointers(target.conn, second.job_id)),
                   default=None)  # fmt: skip
    started = second.restart(DRIVER_START_S)
    proc = second.proc
    report = second.report_of(proc.pid, "started") if started and proc is not None else None
    restored = report.get("restored_from") if report else None
    above = max(_own_completions(second), default=0)
    checkpointed = started and poll_until(
        lambda: _own_completions(second, above) or (proc is not None and proc.poll() is not None),
        deadline_s) and bool(_own_completions(second, above))  # fmt: skip
    exited = proc is not None and proc.poll() is not None
    why = f"its driver exited: {last_log_line(second, 'driver-endless')}" if exited else ""
    return check_restored_own_checkpoint(second.job_id, retained,
                                         None if restored is None else int(restored),
                                         bool(checkpointed), why)  # fmt: skip


def timeout_above_grace_refused(target: LocalCluster, grace_s: float) -> Invariant:
    """Register a probe job whose checkpoint timeout is above the grace period."""
    timeout_s = grace_s * 2 + 60
    graph = JobGraph(TIMEOUT_PROBE_JOB, (OperatorSpec("source", 1, 128),))
    config = {"interval_ms": 3_600_000, "timeout_ms": int(timeout_s * 1000)}
    with CoordinatorClient(target.addresses(), timeout_s=10.0, retry_for_s=60.0) as client:
        try:
            client.register_job(graph, config)
            outcome = RequestOutcome(None)
        except ClientError as exc:
            outcome = RequestOutcome(exc.status, exc.message)
        if outcome.status is None:
            client.cancel_job(TIMEOUT_PROBE_JOB)  # nothing of the probe stays behind
    return check_timeout_above_grace_refused(outcome, timeout_s, grace_s)


def _newest_shared_ms(target: LocalCluster, job_id: str) -> int:
    fs = filesystem_for(target.checkpoint_dir)
    files = list_shared_files(fs, shared_directory(target.checkpoint_dir, job_id))
    return max((f.modification_time_ms for f in files), default=0)


def slow_ack(
    target: LocalCluster,
    observer: ClusterObserver,
    deadline_s: float,
    n: int,
    before: Observation,
    grace_s: float,
    hold_s: float,
) -> IterationResult:
    """``hold_s``: how long the driver stays frozen (beyond the grace and a scan)."""
    pipeline = target.workload
    if not isinstance(pipeline, DriverProcess) or pipeline.proc is None:
        raise DrillError(f"{SLOW_ACK} needs a pipeline driver (--workload pipeline or kafka)")
    invariants = [timeout_above_grace_refused(target, grace_s)]
    max_before = max((cid for cid, _ in before.completions), default=0)
    job = pipeline.job_id
    incremental = getattr(pipeline, "state_backend", None) == "rocksdb"
    newest_before = _newest_shared_ms(target, job) if incremental else 0
    in_flight = poll_until(lambda: pending_ids(target.addresses(), job), deadline_s)
    # With RocksDB, wait until the checkpoint in flight wrote its first new shared file:
    # one subtask's upload is done, the others' (one task at a time) and the driver's
    # acknowledgement are still to come — the file the collector must not take for an
    # orphan while they wait.
    written = in_flight and (not incremental or poll_until(
        lambda: _newest_shared_ms(target, job) > newest_before, deadline_s))  # fmt: skip
    t0 = time.monotonic() - observer.started
    group = pipeline.proc.pid  # the driver's own session: its JVM and Python workers too
    os.killpg(group, signal.SIGSTOP)
    try:
        held = sorted(pending_ids(target.addresses(), job) or ())  # still unacknowledged
        threading.Event().wait(hold_s)  # the fault itself: the acknowledgement held back
    finally:
        os.killpg(group, signal.SIGCONT)
    thawed = time.monotonic() - observer.started
    ckpt_at = next_completion(observer, max_before, thawed, deadline_s)
    invariants.append(Invariant(
        "checkpoints_go_on", ckpt_at is not None,
        "a checkpoint completed after the thaw" if ckpt_at is not None
        else f"nothing completed within {deadline_s:g} s of the thaw"))  # fmt: skip
    invariants.append(shared_files_exist(target, grace_s))
    obs = observer.snapshot()
    return IterationResult(
        n, f"{SLOW_ACK} {hold_s:.1f} s",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance, invariants=invariants,
        notes={"checkpoint_in_flight": bool(in_flight), "new_shared_files": bool(written),
               "held_pending": held, "incremental": incremental},
    )  # fmt: skip
