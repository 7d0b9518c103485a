"""The drills read checkpoint storage through ``sparkpoint.storage``: the orphan check's
directory listing, the quorum-loss drill's "nothing written" check and the latest
retained checkpoint's load see the same on the local disk and on the suite's real HDFS.
And the HDFS faults are offered only for checkpoints on a local HDFS."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkpoint.ha import Fence, ZooKeeperConnection, read_epoch
from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from sparkpoint.ops.drills.chaos import FAULTS, plan_faults
from sparkpoint.ops.drills.hdfs_faults import DATANODE_KILL, HDFS_FAULTS, NAMENODE_RESTART
from sparkpoint.ops.drills.invariants import check_latest_restorable, check_no_stale_directories
from sparkpoint.ops.drills.verification import (
    checkpoint_directories,
    latest_restore_check,
    metadata_written_after,
)
from sparkpoint.storage import METADATA_FILE_NAME, CheckpointStorage
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.recovery.support import pointer_for, write_keyed_checkpoint
from tests.support.hdfs import HDFS_OPTIONS


@pytest.fixture(params=["local", "webhdfs"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "checkpoints")
    return f"{request.getfixturevalue('hdfs_dir')}/checkpoints"


def test_checkpoint_directories_and_metadata_through_storage(root: str) -> None:
    storage = CheckpointStorage(root, **(HDFS_OPTIONS if "://" in root else {}))
    before = time.time() - 1  # the NameNode's clock is this machine's, in milliseconds
    fs = storage.filesystem(root)
    for cid in (3, 5):
        location = storage.init_checkpoint("clicks", cid)
        fs.create_exclusive(f"{location.directory}/{METADATA_FILE_NAME}", b"m")
    storage.init_checkpoint("clicks", 4)  # in flight: no file yet

    found = checkpoint_directories(root, "clicks")
    assert [(d.checkpoint_id, d.has_files) for d in found] == [(3, True), (4, False), (5, True)]
    assert all(-5 < d.age_s < 120 for d in found)
    assert found[0].path == storage.checkpoint_directory("clicks", 3)
    assert checkpoint_directories(root, "other-job") == []

    assert metadata_written_after(root, before) == [
        f"clicks/chk-{cid}/{METADATA_FILE_NAME}" for cid in (3, 5)
    ]
    assert metadata_written_after(root, time.time() + 60) == []
    # chk-3, neither retained nor pending: young now, an orphan seen from an hour later.
    assert check_no_stale_directories(found, retained=[5], pending=[4], grace_s=10).ok
    later = checkpoint_directories(root, "clicks", now=time.time() + 3600)
    stale = check_no_stale_directories(later, retained=[5], pending=[4], grace_s=10)
    assert not stale.ok and "chk-3" in stale.detail and "chk-5" not in stale.detail


def test_the_latest_retained_checkpoint_is_read_where_it_lives(
    root: str, zk_conn: ZooKeeperConnection
) -> None:
    """Loaded and verified on either filesystem; its `_metadata` gone while ZooKeeper
    still retains it is a loss, reported (not taken for a checkpoint subsumed meanwhile)."""
    # Every state stream in a file of its own: none inlined into `_metadata`.
    options = HDFS_OPTIONS if "://" in root else {}
    storage = CheckpointStorage(root, inline_threshold=0, **options)
    store = ZooKeeperCompletedCheckpointStore(
        zk_conn, "clicks", Fence(zk_conn, read_epoch(zk_conn))
    )
    checkpoint, committed = write_keyed_checkpoint(
        storage.init_checkpoint("clicks", 1), {"k": b"v"}
    )
    store.add_checkpoint_and_subsume_oldest(pointer_for(checkpoint, committed))

    whole = latest_restore_check(zk_conn, "clicks")
    assert (whole.checkpoint_id, whole.read_checksum) == (1, committed.checksum)
    assert whole.files >= 1 and not whole.file_problems

    storage.filesystem(root).delete(committed.uri)
    lost = latest_restore_check(zk_conn, "clicks")
    assert lost.checkpoint_id == 1 and lost.read_checksum is None
    verdict = check_latest_restorable(lost)
    assert not verdict.ok and "cannot load" in verdict.detail


def test_hdfs_faults_are_planned_only_when_named() -> None:
    assert not set(plan_faults(1, 50)) & set(HDFS_FAULTS)
    assert not set(FAULTS) & set(HDFS_FAULTS)
    assert set(plan_faults(4, 2, HDFS_FAULTS)) == {DATANODE_KILL, NAMENODE_RESTART}


def drill_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparkpoint", "drill", *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["chaos", "--local", "--fault", "namenode-restart"], "need --storage hdfs"),
        (
            ["kill-leader", "--zookeeper", "127.0.0.1:1", "--cluster-id", "c", "--storage", "hdfs"],
            "--storage is for --local",
        ),
    ],
)
def test_hdfs_options_misused_exit_2(args: list[str], words: str) -> None:
    done = drill_cli(*args)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr


def test_an_hdfs_that_does_not_serve_exits_2_naming_it(tmp_path: Path) -> None:
    # The launcher state of an HDFS whose daemons are gone.
    (tmp_path / "hdfs").mkdir()
    LocalHdfs(tmp_path / "hdfs", datanodes=1)._save_state()
    done = drill_cli("chaos", "--local", "--storage", "hdfs", "--hdfs-dir",
                     str(tmp_path / "hdfs"), "--dir", str(tmp_path / "w"))  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is not serving" in done.stderr and str(tmp_path / "hdfs") in done.stderr
