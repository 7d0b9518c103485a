"""Restore through HDFS: the suite's real NameNode and DataNodes, over WebHDFS."""

from __future__ import annotations

import json
import pickle
from functools import partial
from pathlib import Path

import pytest

from sparkpoint.checkpoint import JobGraph, OperatorSpec
from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from sparkpoint.recovery import plan_restore
from sparkpoint.recovery.loading import load_checkpoint, load_latest_checkpoint
from sparkpoint.recovery.reader import read_subtask_keyed_state
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store.standalone import StandaloneCompletedCheckpointStore
from tests.recovery.support import pointer_for, write_keyed_checkpoint
from tests.support.hdfs import TEST_USER, own_cluster
from tests.support.waiting import wait_until

STATE = {f"user-{i}": pickle.dumps(i) for i in range(1500)}


@pytest.fixture
def hdfs_root(hdfs_dir: str) -> str:
    return f"{hdfs_dir}/checkpoints"


@pytest.mark.parametrize("new_parallelism", [2, 7])
def test_written_at_3_restored_from_hdfs(hdfs_root: str, new_parallelism: int) -> None:
    storage = CheckpointStorage(hdfs_root, inline_threshold=0, user=TEST_USER)
    job = f"hdfs-{new_parallelism}"
    _, committed = write_keyed_checkpoint(storage.init_checkpoint(job, 1), STATE)
    assert committed.uri.startswith("webhdfs://")
    loaded = load_checkpoint(storage, storage.checkpoint_directory(job, 1))
    plan = plan_restore(
        loaded.checkpoint,
        JobGraph(job, (OperatorSpec("count", new_parallelism, 128, keyed=True),)),
    )
    restored: dict[object, bytes] = {}
    for subtask in plan.operators["count"].subtasks:
        for _, key, value in read_subtask_keyed_state(
            subtask, storage.filesystem, max_parallelism=128
        ):
            assert key not in restored
            restored[key] = value
    assert restored == STATE


def test_fallback_on_hdfs(hdfs_root: str) -> None:
    storage = CheckpointStorage(hdfs_root, user=TEST_USER)
    store = StandaloneCompletedCheckpointStore(max_retained=2)
    for cid in (1, 2):
        checkpoint, committed = write_keyed_checkpoint(
            storage.init_checkpoint("hdfs-fb", cid), STATE
        )
        store.add_checkpoint_and_subsume_oldest(pointer_for(checkpoint, committed))
    fs = storage.filesystem(hdfs_root)
    latest = store.get_all()[-1].metadata_uri
    fs.delete(latest)
    loaded = load_latest_checkpoint(store, storage, "hdfs-fb")
    assert loaded is not None and loaded.checkpoint.checkpoint_id == 1
    assert loaded.skipped[0].metadata_uri == latest


def test_cli_plans_from_hdfs(hdfs_root: str) -> None:
    from click.testing import CliRunner

    from sparkpoint.ops.cli.main import main

    storage = CheckpointStorage(hdfs_root, user=TEST_USER)
    write_keyed_checkpoint(storage.init_checkpoint("hdfs-cli", 4), STATE)
    pointer = storage.checkpoint_directory("hdfs-cli", 4)
    result = CliRunner().invoke(
        main, ["restore", "plan", pointer, "-p", "5", "--hdfs-user", TEST_USER, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert [s["index"] for s in json.loads(result.output)["operators"][0]["subtasks"]] == [
        0,
        1,
        2,
        3,
        4,
    ]


@pytest.mark.slow
def test_a_rescaled_subtask_reads_about_its_share_of_the_bytes(tmp_path: Path) -> None:
    """Each new subtask reads its key groups by offset (docs/state-files.md): what it asks
    for is about its share of the state files, and what the DataNodes read from their
    disks for it (their own BytesRead counters, summed over the cluster) is about that.
    A cluster of its own: no other test's reads in the counters."""
    with own_cluster(tmp_path / "hdfs", datanodes=3, replication=2) as cluster:
        _check_reads_by_offset(cluster, f"{cluster.webhdfs_uri}/tmp/share")


def _check_reads_by_offset(hdfs_cluster: LocalHdfs, hdfs_root: str) -> None:
    storage = CheckpointStorage(hdfs_root, inline_threshold=0, user=TEST_USER)
    big = {f"user-{i}": bytes(2000) + pickle.dumps(i) for i in range(3000)}  # ~6 MB, 6 blocks
    write_keyed_checkpoint(storage.init_checkpoint("share", 1), big)
    directory = storage.checkpoint_directory("share", 1)
    loaded = load_checkpoint(storage, directory)
    total = sum(f.size for f in storage.filesystem(directory).list(directory)
                if f.name.startswith("count-"))  # fmt: skip
    new_parallelism = 6
    plan = plan_restore(
        loaded.checkpoint,
        JobGraph("share", (OperatorSpec("count", new_parallelism, 128, keyed=True),)),
    )
    restored: dict[object, bytes] = {}
    for subtask in plan.operators["count"].subtasks:
        before = _bytes_read(hdfs_cluster)
        asked = _CountingReads(storage)
        for _, key, value in read_subtask_keyed_state(
            subtask, asked.filesystem, max_parallelism=128
        ):
            restored[key] = value
        # The DataNodes' counters reach what was delivered once /jmx refreshes (1 s).
        read = wait_until(
            partial(_read_since, hdfs_cluster, before, asked.bytes),
            timeout=90,
            message="the DataNodes' BytesRead to count this subtask's reads",
        )
        assert asked.bytes < 1.5 * total / new_parallelism, (asked.bytes, total)
        assert read < 1.5 * asked.bytes + 64 * 1024, (read, asked.bytes)
    assert restored == big


class _CountingReads:
    """The storage's filesystems, counting the bytes each read hands back."""

    def __init__(self, storage: CheckpointStorage) -> None:
        self.storage = storage
        self.bytes = 0

    def filesystem(self, uri: str) -> object:
        counter, fs = self, self.storage.filesystem(uri)

        class Counted:
            def read_range(self, path: str, offset: int, length: int) -> bytes:
                data = fs.read_range(path, offset, length)
                counter.bytes += len(data)
                return data

            def __getattr__(self, name: str) -> object:
                return getattr(fs, name)

        return Counted()


def _read_since(cluster: LocalHdfs, before: int, at_least: int) -> int:
    read = _bytes_read(cluster) - before
    return read if read >= at_least else 0


def _bytes_read(cluster: LocalHdfs) -> int:
    return sum(c.get("BytesRead", 0) for c in cluster.datanode_counters().values())
