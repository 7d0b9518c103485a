"""The RocksDB backend's store server (state/rocksdb/server.py): stores that stay open
across epochs, a step written once (its undo kept in memory), a retried step after its
worker died, a server killed mid-job, and no server left once the driver is closed.
Real processes and signals; the jobs on the session's Spark (local[2])."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rocksdict import Options, Rdict

from sparkpoint.examples.clicks import user_of
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.state.backend import StoreSettings
from sparkpoint.pipeline.state.rocksdb.client import (
    StoreServerClient,
    server_status,
    stop_server,
)
from sparkpoint.pipeline.state.rocksdb.store import (
    UNDO_PREFIX,
    StoreMismatch,
    StoreToken,
    SubtaskStore,
    state_key,
)
from sparkpoint.pipeline.state_processor.entries import read_state_entries
from tests.pipeline import support
from tests.support.store_servers import running_servers

REPO = Path(__file__).resolve().parents[3]
A, B, C = state_key(1, b"a"), state_key(7, b"b"), state_key(3, b"c")
#: One step: a changed, b deleted, c added.
STEP = [(A, b"A0", b"A1"), (B, b"B0", None), (C, None, b"C1")]
AFTER_STEP = [(1, b"a", b"A1"), (3, b"c", b"C1")]


def _built(directory: Path) -> Path:
    """A store of one subtask under a server ``directory``, at version 0."""
    path = directory / "op" / "0"
    SubtaskStore.create(path, StoreSettings(), [(A, b"A0"), (B, b"B0")]).close()
    return path


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return  # dead, only not reaped yet
        time.sleep(0.02)  # waiting for the signal to take effect


def _kill_server(directory: Path) -> int:
    status = server_status(directory)
    assert status is not None
    os.kill(status["pid"], signal.SIGKILL)
    _wait_gone(status["pid"])
    return status["pid"]


# -- the store --------------------------------------------------------------------------


def test_a_step_writes_no_undo_entries_into_the_files_a_checkpoint_uploads(
    tmp_path: Path,
) -> None:
    store = SubtaskStore.create(tmp_path / "s", StoreSettings(), [(A, b"A0"), (B, b"B0")])
    store.commit_step(store.token(0), STEP)
    store.checkpoint(tmp_path / "copy")
    store.close()
    copy = Rdict(str(tmp_path / "copy"), Options(raw_mode=True))
    try:
        keys = list(copy.keys())
    finally:
        copy.close()
    assert [k for k in keys if k in (A, B, C)] == [A, C]  # the step is in the copy
    assert [k for k in keys if k.startswith(UNDO_PREFIX)] == []


# -- the server, driven from real processes ----------------------------------------------


def test_a_step_retried_after_its_worker_died_is_applied_once(tmp_path: Path) -> None:
    directory = tmp_path / "job" / "tag"
    path = _built(directory)
    # A worker commits the step, then dies before its task ends (its outputs unsent).
    worker = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from sparkpoint.pipeline.state.backend import StoreSettings
        from sparkpoint.pipeline.state.rocksdb.client import StoreServerClient
        from tests.pipeline.state.test_store_server import STEP
        store = StoreServerClient(Path({str(directory)!r}), StoreSettings()).open_existing(
            Path({str(path)!r}))
        token = store.token(0)
        store.prepare_step(token)
        store.commit_step(token, STEP)
        os._exit(1)
        """
    )
    assert subprocess.run([sys.executable, "-c", worker], cwd=REPO, check=False).returncode == 1
    try:
        # Its retry, in another process (this one), starts from version 0 again.
        store = StoreServerClient(directory, StoreSettings()).open_existing(path)
        assert store is not None and store.version == 1
        start = StoreToken(0, 0, store.instance)
        store.prepare_step(start)
        assert store.version == 0
        assert list(store.entries(0, 10)) == [(1, b"a", b"A0"), (7, b"b", b"B0")]
        assert store.get_many([A, B, C]) == [b"A0", b"B0", None]
        after = store.commit_step(start, STEP)
        assert after.version == 1
        assert list(store.entries(0, 10)) == AFTER_STEP
        assert server_status(directory)["opened"] == {str(path): 1}  # type: ignore[index]
    finally:
        stop_server(directory)
    assert running_servers(directory) == []


def test_a_stopped_server_leaves_the_undo_a_killed_one_does_not(tmp_path: Path) -> None:
    directory = tmp_path / "job" / "tag"
    path = _built(directory)
    client = StoreServerClient(directory, StoreSettings())
    store = client.open_existing(path)
    assert store is not None
    start = store.token(0)
    store.commit_step(start, STEP)
    stop_server(directory)  # closing the store writes the step's undo into it
    assert running_servers(directory) == []
    store = client.open_existing(path)  # a new server
    assert store is not None and store.version == 1
    store.prepare_step(start)  # the retry rolls back from the undo on disk
    assert list(store.entries(0, 10)) == [(1, b"a", b"A0"), (7, b"b", b"B0")]
    store.commit_step(start, STEP)
    killed = _kill_server(directory)
    try:
        store = client.open_existing(path)
        assert store is not None and store.version == 1
        assert server_status(directory)["pid"] != killed  # type: ignore[index]
        # The step is there, whole; its undo went with the server: a retry is refused.
        assert list(store.entries(0, 10)) == AFTER_STEP
        with pytest.raises(StoreMismatch, match="no undo"):
            store.prepare_step(start)
        store.prepare_step(StoreToken(0, 1, start.instance))  # the next step is fine
    finally:
        stop_server(directory)
    assert running_servers(directory) == []


# -- jobs on Spark --------------------------------------------------------------------------


def _driver(spark: Any, tmp_path: Path, job_id: str) -> PipelineDriver:
    p = support.pipeline(job_id, tmp_path / "out", 4).with_state_backend("rocksdb")
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=support.MANUAL)
    return PipelineDriver(p, spark, channel)


def _server_directory(driver: PipelineDriver) -> Path:
    return driver._state_tasks[0]._tasks.place.server_directory  # type: ignore[attr-defined]


def _expected_totals() -> dict[Any, tuple[int, int]]:
    clicks: Counter[Any] = Counter()
    spent: Counter[Any] = Counter()
    for _, _, record in support.source().all_records():
        clicks[user_of(record)] += 1
        spent[user_of(record)] += record["amount"]
    return {user: (clicks[user], spent[user]) for user in clicks}


def _checkpointed_totals(tmp_path: Path, job_id: str) -> dict[Any, tuple[int, int]]:
    pointer = str(tmp_path / "ckpt" / job_id)
    return {e.key: e.value for e in read_state_entries(pointer, "process") if e.state == "totals"}


def test_stores_stay_open_across_epochs_and_their_server_ends_with_the_driver(
    spark: Any, tmp_path: Path
) -> None:
    driver = _driver(spark, tmp_path, "warm")
    directory = _server_directory(driver)
    try:
        driver.start()
        driver.run(max_epochs=2)
        driver.channel.trigger_checkpoint()
        driver.run(max_epochs=2)  # a checkpoint, and epochs after it
        status = server_status(directory)
        assert status is not None
        # Each subtask's store was opened once, by the load; no epoch or snapshot reopened it.
        stores = {str(directory / "process" / str(i)): 1 for i in range(4)}
        assert status["opened"] == stores
        driver.run()
        driver.finish()
        assert server_status(directory)["opened"] == stores  # type: ignore[index]
    finally:
        driver.close()
    assert running_servers(directory) == []
    assert server_status(directory) is None
    assert support.committed(driver.pipeline) == support.expected()
    assert _checkpointed_totals(tmp_path, "warm") == _expected_totals()


def test_a_store_server_killed_mid_job_is_started_again_with_the_state_intact(
    spark: Any, tmp_path: Path
) -> None:
    driver = _driver(spark, tmp_path, "killed-server")
    directory = _server_directory(driver)
    try:
        driver.start()
        driver.run(max_epochs=1)
        driver.channel.trigger_checkpoint()
        driver.run(max_epochs=2)
        killed = _kill_server(directory)
        assert running_servers(directory) == []
        driver.run()  # the next epoch's tasks start a server, which opens the stores
        driver.finish()
        status = server_status(directory)
        assert status is not None and status["pid"] != killed
    finally:
        driver.close()
    assert running_servers(directory) == []
    assert support.committed(driver.pipeline) == support.expected()
    # The last checkpoint holds every record's effect exactly once.
    assert _checkpointed_totals(tmp_path, "killed-server") == _expected_totals()
    consumed = support.consumed(str(tmp_path / "ckpt" / "killed-server"))
    assert sorted(consumed.values()) == [support.RECORDS_PER_SPLIT] * support.SPLITS
