"""The chaos drill's HDFS faults, offered when the checkpoints live on an HDFS this
machine runs (``--storage hdfs``: the cluster of ``sparkpoint hdfs start``, or one the
drill started):

- ``datanode-kill``: one running DataNode killed (SIGKILL) at replication 2 or more;
  a checkpoint triggered after the kill must complete without it (the writers' pipelines
  go on with the other replicas), then the DataNode is started again on its old ports
  and data and must be live again.
- ``namenode-restart``: the NameNode killed (SIGKILL) and started again at once; it must
  serve again (every DataNode registered, safe mode off), and a checkpoint triggered
  after its return must complete. What was in flight meanwhile may be declined or
  aborted: that is tolerated (``HDFS_TOLERABLE_FAILURES``), not counted as the job's
  failure.

Like ``kafka-broker-restart``, they are not in the default list: the drill adds them
only for a target with an ``hdfs`` attribute holding its :class:`LocalHdfs`.
"""

from __future__ import annotations

import random
import signal
import time
from typing import Protocol, runtime_checkable

from sparkpoint.ops.devcluster.hdfs import HdfsLaunchError, LocalHdfs
from sparkpoint.ops.drills.cluster import DrillError, LocalCluster
from sparkpoint.ops.drills.invariants import Invariant
from sparkpoint.ops.drills.job_faults import next_completion
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import IterationResult
from sparkpoint.ops.drills.verification import pending_ids

DATANODE_KILL = "datanode-kill"
NAMENODE_RESTART = "namenode-restart"
HDFS_FAULTS = (DATANODE_KILL, NAMENODE_RESTART)
#: ``execution.checkpointing.tolerable-failed-checkpoints`` of the replicas when HDFS
#: faults may be drawn. While the NameNode restarts (a JVM start, the DataNodes
#: registering again: 10 to 30 s here) a checkpoint cannot create its directory or commit its
#: `_metadata`; the leader's storage calls retry for up to 45 s, so one or two
#: checkpoints in a row are declined or aborted, not one per interval. With the product's
#: 0 the first of them would fail the job — a drill finding about the setting, not about
#: HDFS. 5 covers a restart with a margin, and a job that cannot checkpoint for longer
#: still fails.
HDFS_TOLERABLE_FAILURES = 5


@runtime_checkable
class StoresOnHdfs(Protocol):
    hdfs: LocalHdfs


def _hdfs(target: LocalCluster, fault: str) -> LocalHdfs:
    if not isinstance(target, StoresOnHdfs) or target.hdfs is None:
        raise DrillError(f"{fault} needs the checkpoints on a local HDFS (--storage hdfs)")
    return target.hdfs


def _floor(target: LocalCluster, before: Observation) -> int:
    """The highest id completed or in flight now: a checkpoint above it is triggered
    after this moment."""
    completed = max((cid for cid, _ in before.completions), default=0)
    in_flight = pending_ids(target.addresses(), target.workload.job_id) or set()
    return max({completed, *in_flight})


def datanode_kill(
    target: LocalCluster,
    observer: ClusterObserver,
    deadline_s: float,
    n: int,
    before: Observation,
    rng: random.Random,
) -> IterationResult:
    hdfs = _hdfs(target, DATANODE_KILL)
    running = hdfs.running_datanodes()
    if hdfs.replication < 2 or len(running) < 2:
        raise DrillError(
            f"{DATANODE_KILL} needs replication 2 or more and 2 running DataNodes (the HDFS "
            f"at {hdfs.base_dir}: replication {hdfs.replication}, {len(running)} running): "
            "with one replica a lost DataNode loses checkpoint data"
        )
    victim = rng.choice(running)
    t0 = time.monotonic() - observer.started
    floor = _floor(target, before)
    hdfs.stop_daemon(victim, signal.SIGKILL)
    try:
        ckpt_at = next_completion(observer, floor, t0, deadline_s)
    finally:
        hdfs.start_daemon(victim)
    try:
        hdfs.wait_ready(timeout=deadline_s, datanodes=len(hdfs.datanodes))
        back = Invariant("datanode_rejoined", True, f"{victim.name} live again")
    except HdfsLaunchError as exc:
        back = Invariant("datanode_rejoined", False, str(exc))
    obs = observer.snapshot()
    result = IterationResult(
        n, f"{DATANODE_KILL} {victim.name} of {len(hdfs.datanodes)} "
        f"(replication {hdfs.replication})",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance,
    )  # fmt: skip
    result.invariants += [
        Invariant(
            "checkpoints_go_on", ckpt_at is not None,
            f"a checkpoint above {floor} completed without {victim.name}" if ckpt_at is not None
            else f"nothing above {floor} completed within {deadline_s:g} s without "
            f"{victim.name}"),
        back,
    ]  # fmt: skip
    return result


def namenode_restart(
    target: LocalCluster,
    observer: ClusterObserver,
    deadline_s: float,
    n: int,
    before: Observation,
    _rng: random.Random | None = None,  # one NameNode: nothing to pick
) -> IterationResult:
    hdfs = _hdfs(target, NAMENODE_RESTART)
    datanodes = len(hdfs.running_datanodes())
    t0 = time.monotonic() - observer.started
    hdfs.stop_daemon(hdfs.namenode, signal.SIGKILL)
    hdfs.start_daemon(hdfs.namenode)
    try:
        hdfs.wait_ready(timeout=deadline_s, datanodes=datanodes)
        back = Invariant("namenode_serving_again", True,
                         f"serving, {datanodes} DataNodes live, safe mode off")  # fmt: skip
    except HdfsLaunchError as exc:
        back = Invariant("namenode_serving_again", False, str(exc))
    restarted = time.monotonic() - observer.started
    floor = _floor(target, observer.snapshot())
    ckpt_at = next_completion(observer, floor, restarted, deadline_s)
    obs = observer.snapshot()
    result = IterationResult(
        n, f"{NAMENODE_RESTART} (SIGKILL, started again)",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance,
        notes={"namenode_restart_s": round(restarted - t0, 3)},
    )  # fmt: skip
    result.invariants += [
        back,
        Invariant(
            "checkpoints_go_on", ckpt_at is not None,
            f"a checkpoint above {floor} completed after the restart" if ckpt_at is not None
            else f"nothing above {floor} completed within {deadline_s:g} s of the restart"),
    ]  # fmt: skip
    return result
