"""The chaos drill's faults on the job rather than on a process: where a job is registered
again, or a decision is taken on a view that may be stale.

- ``stop-and-register``: the job is stopped with a savepoint — over for the whole cluster:
  its store, directories and registry record go, the deletions queued in the background
  — and registered again under the same id from that savepoint, at once. The new
  incarnation's ids must continue the old ones, and none of its files may be touched by
  the old incarnation's deletions. (A bare cancel ends a job the same way but throws its
  state away; then the drill's exactly-once check of the output would have nothing to
  hold the new incarnation to.)
- ``rescale-in-flight``: the driver is killed while a checkpoint is in flight and starts
  again at another parallelism: its registration replaces the job's coordinator while the
  old one may still be publishing. The restore plan must name the newest checkpoint and
  its files must stay.
- ``slow-deletions``: every replica deletes as slowly as a slow HDFS
  (``state.checkpoints.cleanup.delay``); the leader is frozen while its deletion queue
  holds work, deposed, then thawed with that queue: none of it may run.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

from sparkpoint.client import ClientError, Conflict, CoordinatorClient
from sparkpoint.drills.cluster import DrillError, LocalCluster
from sparkpoint.drills.invariants import Invariant
from sparkpoint.drills.observer import ClusterObserver, Observation
from sparkpoint.drills.report import IterationResult
from sparkpoint.drills.verification import pending_ids
from sparkpoint.drills.workload import DriverProcess
from sparkpoint.storage.uri import parse

JOB_FAULTS = ("stop-and-register", "rescale-in-flight", "slow-deletions")
#: The deletion delay of every replica when ``slow-deletions`` may be drawn: slower than a
#: local disk by far, fast enough to keep up with one checkpoint a second.
SLOW_DELETION_S = 0.5
# A restarted driver starts a Spark session first: minutes on a loaded 2-core machine.
DRIVER_START_S = 300.0


def next_completion(
    observer: ClusterObserver, max_before: int, since_s: float, deadline_s: float
) -> float | None:
    """When the first checkpoint above ``max_before`` completed at or after ``since_s``."""
    found = observer.wait_for(
        lambda o: next((at for cid, at in o.completions if cid > max_before and at >= since_s),
                       None), deadline_s)  # fmt: skip
    return float(found) if isinstance(found, float) else None


def driver_process(target: LocalCluster, fault: str) -> DriverProcess:
    """The workload's driver process (the demo pipeline's, or the Kafka workload's)."""
    if not isinstance(target.workload, DriverProcess):
        raise DrillError(f"{fault} needs a pipeline driver (--workload pipeline or kafka)")
    return target.workload


def poll_until(condition: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)  # a polling interval, not a synchronisation
    return False


def _request_stop(target: LocalCluster, job_id: str) -> bool:
    """Ask for a stop-with-savepoint until one is taken. A request that timed out may have
    been taken: asking again is then refused (a stop is in progress), which says so."""
    with CoordinatorClient(target.addresses(), timeout_s=10.0, retry_for_s=60.0) as client:
        for _ in range(5):
            try:
                client.trigger_savepoint(job_id, None, stop=True)
                return True
            except Conflict:
                return True  # ours, from an attempt whose answer was lost
            except ClientError:
                continue
    return False


def stop_and_register(
    target: LocalCluster, observer: ClusterObserver, deadline_s: float, n: int, before: Observation
) -> IterationResult:
    pipeline = driver_process(target, "stop-and-register")
    job_id = pipeline.job_id
    max_before = max((cid for cid, _ in before.completions), default=0)
    t0 = time.monotonic() - observer.started
    requested = _request_stop(target, job_id)
    proc = pipeline.proc
    stopped = proc is not None and poll_until(lambda: proc.poll() is not None, deadline_s)
    # Whichever request took (one may have timed out with its outcome unknown), the stop
    # savepoint is the one the driver heard complete with the stop flag.
    done = [n_ for n_ in pipeline.notices() if n_.get("type") == "complete"
            and n_.get("kind") == "savepoint" and n_.get("stop")]  # fmt: skip
    last = done[-1] if done and stopped else None
    savepoint_id = int(last["checkpoint_id"]) if last else 0
    metadata = last.get("metadata_uri") if last else None
    aborted = [n_ for n_ in pipeline.notices() if n_.get("type") == "abort"
               and n_.get("kind") == "savepoint" and n_.get("stop")]  # fmt: skip
    if not stopped and (not requested or aborted):
        # Nothing was ended: the request was never taken, or the stop savepoint aborted
        # (the job then goes on, as it must). The fault did not happen; the drill goes on.
        result = IterationResult(n, "stop-and-register (not injected)")
        result.notes["why"] = (aborted[-1].get("reason") if aborted
                               else "no stop-with-savepoint request was taken")  # fmt: skip
        return result
    record = target.conn.paths.job(job_id)
    ended = poll_until(lambda: target.conn.client.exists(record) is None, deadline_s)
    invariants = [Invariant(
        "job_ended_with_its_savepoint", bool(stopped and metadata and ended),
        f"savepoint {savepoint_id} completed, driver exited, the job's record removed"
        if stopped and metadata and ended
        else f"driver exited: {stopped}, savepoint completed: {bool(metadata)}, "
        f"record removed: {ended}")]  # fmt: skip
    if not (stopped and metadata):
        pipeline.kill()
        pipeline.restart(DRIVER_START_S)  # the drill goes on from the latest checkpoint
        return IterationResult(n, "stop-and-register", invariants=invariants)
    savepoint_dir = str(parse(str(metadata)).parent)  # local or on HDFS, as it was written
    started = pipeline.restart(DRIVER_START_S, "--restore-from", savepoint_dir)
    restarted_at = time.monotonic() - observer.started
    ckpt_at = next_completion(observer, max_before, restarted_at, deadline_s) if started else None
    obs = observer.snapshot()
    after = [cid for cid, at in obs.completions if at >= restarted_at]
    invariants.append(Invariant(
        "registered_again_and_ids_continue",
        ckpt_at is not None and min(after, default=0) > savepoint_id,
        f"the new incarnation's first checkpoint is {min(after, default=None)}, above "
        f"savepoint {savepoint_id}" if ckpt_at is not None
        else f"no checkpoint within {deadline_s:g} s of registering again"))  # fmt: skip
    return IterationResult(
        n, f"stop-and-register (savepoint {savepoint_id})",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance, invariants=invariants,
        notes={"savepoint": savepoint_dir},
    )  # fmt: skip


def rescale_in_flight(
    target: LocalCluster, observer: ClusterObserver, deadline_s: float, n: int, before: Observation
) -> IterationResult:
    pipeline = driver_process(target, "rescale-in-flight")
    max_before = max((cid for cid, _ in before.completions), default=0)
    in_flight = poll_until(
        lambda: bool(pending_ids(target.addresses(), pipeline.job_id)), deadline_s
    )
    t0 = time.monotonic() - observer.started
    old, pipeline.parallelism = pipeline.parallelism, 3 if pipeline.parallelism == 2 else 2
    pipeline.kill()
    started = pipeline.restart(DRIVER_START_S)
    restarted_at = time.monotonic() - observer.started
    ckpt_at = next_completion(observer, max_before, restarted_at, deadline_s) if started else None
    obs = observer.snapshot()
    result = IterationResult(
        n, f"rescale-in-flight {old} -> {pipeline.parallelism}",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance,
        notes={"checkpoint_in_flight": in_flight, "restart_s": round(restarted_at - t0, 3)},
    )  # fmt: skip
    result.invariants.append(Invariant(
        "rescaled_driver_resumed", ckpt_at is not None,
        f"registered again at parallelism {pipeline.parallelism}, checkpointing again"
        if ckpt_at is not None else "the rescaled driver did not start" if not started
        else f"no checkpoint within {deadline_s:g} s of the restart"))  # fmt: skip
    return result


def queued_deletions(address: str) -> float:
    """The replica's ``sparkpoint_cleanup_queued_deletions`` (0 when it does not answer)."""
    try:
        with urllib.request.urlopen(f"{address}/metrics", timeout=2) as response:
            page = response.read().decode()
    except OSError:
        return 0.0
    for line in page.splitlines():
        if line.startswith("sparkpoint_cleanup_queued_deletions "):
            return float(line.split()[1])
    return 0.0


def wait_for_queued_deletions(target: LocalCluster, leader: str, deadline_s: float) -> bool:
    address = target.replica(leader).address
    return poll_until(lambda: queued_deletions(address) >= 1, deadline_s)


#: The faults that register the job again, by name.
REREGISTRATIONS = {"stop-and-register": stop_and_register, "rescale-in-flight": rescale_in_flight}
