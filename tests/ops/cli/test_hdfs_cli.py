"""`sparkpoint hdfs start|status|stop` as a user runs it: real NameNode and DataNodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.hdfs import HdfsLaunchError, LocalHdfs
from sparkpoint.ops.devcluster.hdfs_checkpoints import hdfs_checkpoints
from sparkpoint.storage import CheckpointStorage, filesystem_for
from tests.ops.cli.test_zookeeper_cli import sparkpoint
from tests.storage.test_checkpoint_storage import make_checkpoint
from tests.support.waiting import wait_until


@pytest.mark.slow
def test_start_status_stop(tmp_path: Path) -> None:
    directory = tmp_path / "hdfs"
    started = sparkpoint("hdfs", "start", "--datanodes", "2", "--block-size", "1048576",
                         "--dir", str(directory), "--json")  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        report = json.loads(started.stdout)
        assert (report["live_datanodes"], report["replication"]) == (2, 2)
        assert report["safe_mode"] is False and report["capacity_bytes"] > 0
        # What the printed address is for: a checkpoint directory under /tmp, any user.
        fs = filesystem_for(f"{report['webhdfs_uri']}/tmp/c", user="someone")
        fs.create_exclusive(f"{report['webhdfs_uri']}/tmp/c/f", b"x" * 3_000_000)

        # DataNodes report what they hold with their heartbeats (every 3 s): wait for it.
        def reported() -> dict | None:
            status = sparkpoint("hdfs", "status", "--dir", str(directory), "--json")
            assert status.returncode == 0, status.stderr
            live = json.loads(status.stdout)
            return live if live["used_bytes"] >= 2 * 3_000_000 else None

        live = wait_until(reported, timeout=60, message="the DataNodes report the file")
        assert live["live_datanodes"] == 2
        table = sparkpoint("hdfs", "status", "--dir", str(directory))
        assert "2 live DataNodes" in table.stdout and "safe mode off" in table.stdout
    finally:
        stopped = sparkpoint("hdfs", "stop", "--dir", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    assert LocalHdfs.attach(directory).running() == []
    down = sparkpoint("hdfs", "status", "--dir", str(directory))
    assert down.returncode == 1 and "not serving" in down.stdout


def test_bad_settings_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(HdfsLaunchError, match=r"replication 3 needs 1\.\.2"):
        LocalHdfs(tmp_path, datanodes=2, replication=3)
    with pytest.raises(HdfsLaunchError, match="multiple of 512"):
        LocalHdfs(tmp_path, block_size=1000)
    never = sparkpoint("hdfs", "status", "--dir", str(tmp_path / "none"))
    assert never.returncode == 1 and "no HDFS was started from" in never.stderr


def test_the_demo_uses_a_running_hdfs_and_reports_what_is_left(hdfs_cluster: LocalHdfs) -> None:
    checkpoints = hdfs_checkpoints(hdfs_cluster.base_dir, hdfs_cluster.base_dir / "unused")
    assert not checkpoints.owned and checkpoints.root.startswith(hdfs_cluster.webhdfs_uri)
    storage = CheckpointStorage(checkpoints.root)
    location = storage.init_checkpoint("clicks", 1)
    location.commit_metadata(make_checkpoint(location, 1))
    storage.init_checkpoint("clicks", 2)  # in flight when the demo stopped
    assert checkpoints.left_on_hdfs("clicks") == {"complete": [1], "incomplete": [2]}
    checkpoints.close()  # not ours: keeps running
    assert hdfs_cluster.status()["serving"]
