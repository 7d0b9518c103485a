"""Restore through HDFS: the suite's real NameNode and DataNodes, over WebHDFS."""

from __future__ import annotations

import json
import pickle

import pytest

from sparkpoint.checkpoint import JobGraph, OperatorSpec
from sparkpoint.recovery import plan_restore
from sparkpoint.recovery.loading import load_checkpoint, load_latest_checkpoint
from sparkpoint.recovery.reader import read_subtask_keyed_state
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store.standalone import StandaloneCompletedCheckpointStore
from tests.recovery.support import pointer_for, write_keyed_checkpoint
from tests.support.hdfs import TEST_USER

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

    from sparkpoint.cli.main import main

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
