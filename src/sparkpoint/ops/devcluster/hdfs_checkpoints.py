"""Where the demo and the drills keep checkpoints: the local disk, or a real HDFS (shared
by both, so it sits below both).

With ``--storage hdfs`` the checkpoints go to the HDFS started by ``sparkpoint hdfs start
--dir D`` (``--hdfs-dir D``); when none runs there, one is started under the demo's (or
the drill's) own directory for its lifetime. Either way each run gets a fresh directory
under ``/tmp``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.ops.devcluster.hdfs import HdfsLaunchError, LocalHdfs
from sparkpoint.storage import CheckpointStorage


@dataclass
class HdfsCheckpoints:
    """The checkpoint root on HDFS, and the cluster when this run started it."""

    root: str
    cluster: LocalHdfs
    owned: bool

    def close(self) -> None:
        if self.owned:
            self.cluster.stop()

    def left_on_hdfs(self, job_id: str) -> dict[str, list[int]]:
        """The job's ``chk-<id>`` directories still on HDFS: complete (with `_metadata`)
        and not (in flight when the run stopped, or not yet collected)."""
        storage = CheckpointStorage(self.root)
        every = storage.list_checkpoints(job_id)
        complete = storage.list_checkpoints(job_id, completed_only=True)
        return {"complete": complete, "incomplete": [c for c in every if c not in complete]}


def hdfs_checkpoints(
    hdfs_dir: Path | None, own_dir: Path, run_name: str = "sparkpoint-demo"
) -> HdfsCheckpoints:
    """Use the HDFS launched from ``hdfs_dir`` if it serves, else start one in ``own_dir``;
    the checkpoints go under ``/tmp/<run_name>-<random>/checkpoints``."""
    cluster: LocalHdfs | None = None
    if hdfs_dir is not None and (hdfs_dir / "launcher.json").exists():
        cluster = LocalHdfs.attach(hdfs_dir)
        if not cluster.status()["serving"]:
            raise HdfsLaunchError(
                f"the HDFS started from {hdfs_dir} is not serving: "
                f"see `sparkpoint hdfs status --dir {hdfs_dir}`"
            )
    owned = cluster is None
    if cluster is None:
        cluster = LocalHdfs(own_dir).start()
    root = f"{cluster.webhdfs_uri}/tmp/{run_name}-{uuid.uuid4().hex[:8]}/checkpoints"
    return HdfsCheckpoints(root, cluster, owned)
