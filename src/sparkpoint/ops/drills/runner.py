"""Set up the target, the observer and the report around one drill — the part every
drill kind shares, so that the CLI stays a thin face."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sparkpoint.ha import HAError
from sparkpoint.metadata import MetadataError
from sparkpoint.ops.devcluster.hdfs import HdfsLaunchError
from sparkpoint.ops.devcluster.hdfs_checkpoints import HdfsCheckpoints, hdfs_checkpoints
from sparkpoint.ops.devcluster.jvm import JvmArtifactsError
from sparkpoint.ops.drills.cluster import DrillError, LocalCluster, RemoteTarget, Target
from sparkpoint.ops.drills.invariants import (
    SHARED_FILES_KEPT,
    Invariant,
    check_completions_unique,
    check_ids_rising,
    check_runs_take_turns,
    check_shared_files_kept,
)
from sparkpoint.ops.drills.observer import ClusterObserver
from sparkpoint.ops.drills.replicas import ReplicaSettings
from sparkpoint.ops.drills.report import DrillReport
from sparkpoint.ops.drills.verification import LEAK_MARGIN_S, settled_shared_files_report
from sparkpoint.ops.drills.workload import aborts, completions
from sparkpoint.pipeline.state.backend import default_state_backend
from sparkpoint.storage import StorageError


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """``local`` (with ``directory``, ``pipeline``) or a deployment (``quorum``…)."""

    local: bool
    directory: Path | None = None
    pipeline: bool = True
    settings: ReplicaSettings = field(default_factory=ReplicaSettings)
    quorum: str | None = None
    cluster_id: str | None = None
    root: str | None = None
    restart_command: str | None = None
    job_id: str | None = None
    signal_command: str | None = None
    zookeeper_proxies: bool = False
    #: --local: the workload's checkpoint interval (ms); None: the workload's default.
    checkpoint_interval_ms: int | None = None
    #: --local: the demo pipeline's state backend (``memory``, ``rocksdb``); None: its default.
    state_backend: str | None = None
    #: --local: where checkpoints go, ``local`` (the drill's directory) or ``hdfs``.
    storage: str = "local"
    #: --storage hdfs: the ``--dir`` of ``sparkpoint hdfs start`` (else the drill starts one).
    hdfs_dir: Path | None = None
    #: --local: brokers of the Kafka workload's local Kafka; 0: the demo pipeline's clicks.
    kafka_nodes: int = 0


def describe(spec: TargetSpec, target: Target) -> dict[str, object]:
    s = target.settings
    return {
        "target": "local" if spec.local else f"{spec.quorum} cluster {spec.cluster_id}",
        "directory": str(spec.directory) if spec.local and spec.directory else None,
        "replicas": len(target.addresses()),
        "zookeeper_servers": 3 if spec.local else None,
        "workload": _workload(spec),
        "session_timeout_s": s.session_timeout_s,
        "takeover_timeout_s": s.takeover_timeout_s,
        "renew_interval_s": s.renew_interval_s,
        "num_retained": s.num_retained,
        "tolerable_failed_checkpoints": s.tolerable_failed_checkpoints if spec.local else None,
        "zookeeper_fault_proxies": spec.zookeeper_proxies,
        "checkpoint_interval_ms": target.workload.interval_ms if spec.local else None,
        "state_backend": (spec.state_backend or default_state_backend().name)
        if spec.local and spec.pipeline and not spec.kafka_nodes else None,
        "storage": spec.storage if spec.local else None,
        **(_hdfs_description(target) if isinstance(target, LocalCluster) else {}),
    }  # fmt: skip


def _workload(spec: TargetSpec) -> str:
    if not (spec.local and spec.pipeline):
        return "acknowledging driver"
    if spec.kafka_nodes:
        return f"orders job, Kafka to Kafka ({spec.kafka_nodes} broker(s), exactly-once sink)"
    return "demo pipeline (clicks)"


def _hdfs_description(target: LocalCluster) -> dict[str, object]:
    if target.hdfs is None:
        return {}
    return {"checkpoint_dir": target.checkpoint_dir,
            "hdfs_datanodes": len(target.hdfs.datanodes),
            "hdfs_replication": target.hdfs.replication}  # fmt: skip


def _checkpoints_on_hdfs(spec: TargetSpec, directory: Path) -> HdfsCheckpoints:
    try:
        return hdfs_checkpoints(spec.hdfs_dir, directory / "hdfs", run_name="sparkpoint-drill")
    except (HdfsLaunchError, JvmArtifactsError) as exc:
        raise DrillError(f"HDFS for the checkpoints: {exc}") from exc


@contextmanager
def drill_target(spec: TargetSpec) -> Iterator[tuple[Target, ClusterObserver]]:
    target: Target
    hdfs: HdfsCheckpoints | None = None
    if spec.local:
        directory = spec.directory or Path(tempfile.mkdtemp(prefix="sparkpoint-drill-"))
        hdfs = _checkpoints_on_hdfs(spec, directory) if spec.storage == "hdfs" else None
        target = LocalCluster(directory, spec.settings, pipeline=spec.pipeline,
                              zookeeper_proxies=spec.zookeeper_proxies,
                              checkpoint_interval_ms=spec.checkpoint_interval_ms,
                              state_backend=spec.state_backend,
                              checkpoint_root=hdfs.root if hdfs else None,
                              hdfs=hdfs.cluster if hdfs else None,
                              kafka_nodes=spec.kafka_nodes)  # fmt: skip
        try:
            target.start()
        except BaseException:
            target.close()
            if hdfs is not None:
                hdfs.close()
            raise
    else:
        assert spec.quorum and spec.cluster_id
        target = RemoteTarget(spec.quorum, spec.cluster_id, spec.root, spec.settings,
                              spec.restart_command, spec.job_id,
                              spec.signal_command).start()  # fmt: skip
    observer = ClusterObserver(target.conn, target.workload.job_id, target.addresses).start()
    try:
        yield target, observer
    finally:
        observer.stop()
        target.close()
        if hdfs is not None:
            hdfs.close()  # only an HDFS the drill started itself


def finish(
    report: DrillReport, target: Target, observer: ClusterObserver, timeout: float = 300.0
) -> DrillReport:
    """Whole-run checks: ids over every iteration, the workload's exactly-once verdict,
    every completion the drivers heard (the last run's included) announced once, the
    driver runs taking turns, and (local cluster) the job's shared state files."""
    report.overall.append(check_ids_rising(observer.completion_ids()))
    verdict = target.workload.finish(timeout)
    if verdict is not None:
        report.overall.append(verdict)
    heard = target.workload.notices()
    report.overall.append(check_completions_unique(completions(heard)))
    report.overall.append(check_runs_take_turns(completions(heard)))
    if isinstance(target, LocalCluster):
        report.overall.append(shared_files_verdict(target))
    report.aborted = [{"id": n.get("checkpoint_id"), "reason": n.get("reason")}
                      for n in aborts(heard)]  # fmt: skip
    return report


def shared_files_verdict(target: LocalCluster) -> Invariant:
    """No shared file a retained checkpoint references is missing, none that nothing
    references is left once the collector had its grace period, a scan and a margin —
    over every job of the drill (the workload's, and those the chaos drill started from
    its checkpoints, which may reference its files)."""
    s = target.settings
    grace_s = s.orphan_grace_s + s.orphan_scan_interval_s
    try:
        found = settled_shared_files_report(target.conn, target.checkpoint_dir,
                                            target.job_ids(), grace_s,
                                            within_s=grace_s + LEAK_MARGIN_S)  # fmt: skip
    except (HAError, StorageError, MetadataError) as exc:
        return Invariant(SHARED_FILES_KEPT, False, f"cannot read: {exc}")
    return check_shared_files_kept(found, grace_s)


def run_drill(
    spec: TargetSpec,
    body: Callable[[Target, ClusterObserver, dict[str, object]], DrillReport],
) -> DrillReport:
    with drill_target(spec) as (target, observer):
        report = body(target, observer, describe(spec, target))
        return finish(report, target, observer)
