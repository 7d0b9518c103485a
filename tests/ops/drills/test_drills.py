"""Each drill once, short, through the real CLI against a real local cluster (a 3-server
ZooKeeper ensemble, three coordinator processes, and the demo pipeline or the
acknowledging driver). The assertions are on the report: every invariant held, the
figures are there, and the files were written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from sparkpoint.ops.drills.hdfs_faults import HDFS_TOLERABLE_FAILURES
from sparkpoint.storage import CheckpointStorage
from tests.support.hdfs import own_cluster

pytestmark = pytest.mark.slow


def drill(tmp_path: Path, *args: str, timeout: float = 280) -> tuple[int, dict[str, Any], Path]:
    report_dir = tmp_path / "report"
    command = [sys.executable, "-m", "sparkpoint", "drill", *args, "--local",
               "--dir", str(tmp_path / "work"), "--report", str(report_dir), "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.stdout, done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), report_dir


def assert_written(report_dir: Path, report: dict[str, Any]) -> None:
    assert json.loads((report_dir / "report.json").read_text()) == report
    assert "invariants: all held" in (report_dir / "summary.txt").read_text()
    png = (report_dir / "failover.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 1000


def test_kill_leader_with_the_demo_pipeline_on_the_on_disk_backend(tmp_path: Path) -> None:
    code, report, report_dir = drill(tmp_path, "kill-leader", "--iterations", "2",
                                     "--interval", "0", "--state-backend", "rocksdb",
                                     "--num-retained", "3")  # fmt: skip
    assert code == 0, report["violations"]
    assert report["ok"] and report["violations"] == []
    assert len(report["iterations"]) == 2
    for it in report["iterations"]:
        assert it["action"].startswith("SIGKILL coordinator-")
        assert it["time_to_leader_s"] > 0 and it["time_to_checkpoint_s"] > 0
        assert it["new_term"] > it["old_term"]
        assert {i["name"] for i in it["invariants"]} == {
            "single_leader", "ids_strictly_rising", "no_retained_checkpoint_lost"}  # fmt: skip
    overall = {i["name"]: i for i in report["overall"]}
    assert overall["exactly_once_output"]["ok"], overall["exactly_once_output"]
    assert overall["ids_strictly_rising"]["ok"]
    # Incremental checkpoints: their shared files all there, none left unreferenced.
    shared = overall["shared_files_referenced_and_collected"]
    assert shared["ok"] and not shared["detail"].startswith("0 referenced"), shared
    assert report["config"]["state_backend"] == "rocksdb"
    assert report["config"]["num_retained"] == 3
    figures = report["figures"]["time_to_checkpoint_s"]
    assert figures["median_over_session_timeout"] == pytest.approx(
        figures["median"] / report["config"]["session_timeout_s"], abs=1e-3
    )
    assert_written(report_dir, report)


@pytest.mark.timeout(900)  # three Spark drivers start: the active, the standby, the replay
def test_kill_driver_the_warm_standby_takes_over(tmp_path: Path) -> None:
    code, report, report_dir = drill(tmp_path, "kill-driver", "--iterations", "1", timeout=800)
    assert code == 0, report["violations"]
    [it] = report["iterations"]
    assert it["action"].startswith("SIGKILL driver pid")
    assert it["notes"]["new_run"] != it["notes"]["old_run"]
    assert it["notes"]["restored_from"] >= 1
    assert set(it["phases"]) == {"detection", "restore", "first_checkpoint"}
    assert it["time_to_checkpoint_s"] == pytest.approx(sum(it["phases"].values()), abs=0.1)
    overall = {i["name"]: i for i in report["overall"]}
    for name in ("exactly_once_output", "one_driver_run_completes_at_a_time",
                 "each_checkpoint_completed_once"):  # fmt: skip
        assert overall[name]["ok"], overall[name]
    assert report["config"]["driver_takeover_timeout_s"] == 3.0  # the product's default
    assert_written(report_dir, report)


def test_pause_leader_zombie_is_fenced_and_steps_down(tmp_path: Path) -> None:
    code, report, report_dir = drill(tmp_path, "pause-leader", "--workload", "driver")
    assert code == 0, report["violations"]
    (it,) = report["iterations"]
    names = {i["name"] for i in it["invariants"] if i["ok"]}
    assert {"taken_over_while_frozen", "zombie_never_acted", "zombie_write_fenced",
            "zombie_stepped_down", "single_leader", "ids_strictly_rising"} <= names  # fmt: skip
    assert it["notes"]["zombie_state_after"] == "follower"
    assert_written(report_dir, report)


def test_zookeeper_loss_one_server_then_the_quorum(tmp_path: Path) -> None:
    code, report, report_dir = drill(tmp_path, "zookeeper-loss", "--workload", "driver",
                                     "--outage", "4")  # fmt: skip
    assert code == 0, report["violations"]
    one, lost, back = report["iterations"]
    assert one["time_to_checkpoint_s"] is not None
    assert {i["name"] for i in lost["invariants"]} == {
        "no_leader_acts", "nothing_written", "nothing_completed"}  # fmt: skip
    assert back["time_to_leader_s"] is not None and back["time_to_checkpoint_s"] is not None
    assert all(i["ok"] for it in report["iterations"] for i in it["invariants"])
    assert_written(report_dir, report)


def test_chaos_the_leader_cut_off_from_zookeeper_then_its_replies_dropped(
    tmp_path: Path,
) -> None:
    # Seed 4 over these two faults: the cut-off first, then the lost replies.
    code, report, report_dir = drill(tmp_path, "chaos", "--workload", "driver",
                                     "--iterations", "2", "--seed", "4", "--interval", "0",
                                     "--fault", "zookeeper-cut-off",
                                     "--fault", "zookeeper-replies-dropped")  # fmt: skip
    assert code == 0, report["violations"]
    first, second = report["iterations"]
    assert first["notes"]["fault"] == "zookeeper-cut-off"
    assert second["notes"]["fault"] == "zookeeper-replies-dropped"
    for it in report["iterations"]:
        assert it["new_term"] > it["old_term"] and it["time_to_checkpoint_s"] > 0
        assert {i["name"] for i in it["invariants"]} >= {
            "single_leader", "old_leader_rejoined", "each_checkpoint_completed_once",
            "latest_checkpoint_restorable", "no_checkpoint_directory_outlives_grace"}  # fmt: skip
    assert report["config"]["zookeeper_fault_proxies"] is True
    assert report["config"]["num_retained"] == 1
    assert report["config"]["tolerable_failed_checkpoints"] == 0
    assert_written(report_dir, report)


@pytest.mark.timeout(420)  # an HDFS of the test's own starts first
def test_chaos_on_hdfs_a_datanode_killed_then_the_namenode_restarted(tmp_path: Path) -> None:
    """--storage hdfs on an HDFS started as `sparkpoint hdfs start` does (the test's own:
    its daemons are killed): seed 4 over the two HDFS faults draws a DataNode kill, then a
    NameNode restart. Every invariant reads the checkpoints on HDFS."""
    with own_cluster(tmp_path / "hdfs", datanodes=3, replication=2) as cluster:
        try:
            code, report, report_dir = drill(tmp_path, "chaos", "--workload", "driver",
                                             "--storage", "hdfs",
                                             "--hdfs-dir", str(cluster.base_dir),
                                             "--iterations", "2", "--seed", "4",
                                             "--interval", "0", "--fault", "datanode-kill",
                                             "--fault", "namenode-restart")  # fmt: skip
            root = report["config"]["checkpoint_dir"]
            retained = CheckpointStorage(root).list_checkpoints("drill-job", completed_only=True)
            after = LocalHdfs.attach(cluster.base_dir).status()
        finally:
            # The drill started the killed daemons again: its launcher state names them.
            LocalHdfs.attach(cluster.base_dir).stop()
    assert code == 0, report["violations"]
    first, second = report["iterations"]
    assert first["notes"]["fault"] == "datanode-kill"
    assert first["action"].startswith("datanode-kill datanode-")
    assert second["notes"]["fault"] == "namenode-restart"
    names = {"checkpoints_go_on", "latest_checkpoint_restorable",
             "no_checkpoint_directory_outlives_grace", "no_retained_checkpoint_lost"}  # fmt: skip
    assert {i["name"] for i in first["invariants"]} >= {*names, "datanode_rejoined"}
    assert {i["name"] for i in second["invariants"]} >= {*names, "namenode_serving_again"}
    assert all(it["time_to_checkpoint_s"] > 0 for it in report["iterations"])
    config = report["config"]
    assert root.startswith(cluster.webhdfs_uri)
    assert (config["storage"], config["hdfs_replication"]) == ("hdfs", 2)
    assert config["tolerable_failed_checkpoints"] == HDFS_TOLERABLE_FAILURES
    assert retained, f"no complete checkpoint left on HDFS under {root}"
    assert after["live_datanodes"] == 3 and after["serving"]
    assert_written(report_dir, report)
