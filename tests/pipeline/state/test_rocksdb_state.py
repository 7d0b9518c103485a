"""The on-disk (RocksDB) state backend: its store's versions and undo, and exactly-once
on real Spark — rescaled restores, a switch of backend, Python workers killed before and
after an epoch's write batch (local-cluster). An executor JVM killed: test_processes.py."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.clicks import expected_output
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.sinks.files import TransactionalFileSink
from sparkpoint.pipeline.state.backend import StateBackend, StoreSettings, state_backend
from sparkpoint.pipeline.state.rocksdb.store import (
    StoreMismatch,
    StoreToken,
    SubtaskStore,
    state_key,
)
from tests.pipeline import support
from tests.pipeline.state import rocks_faults

MANUAL = 3_600_000
REPO = Path(__file__).resolve().parents[3]


# -- the store ----------------------------------------------------------------------------


def _store(tmp_path: Path) -> SubtaskStore:
    entries = [(state_key(1, b"a"), b"A0"), (state_key(7, b"b"), b"B0")]
    return SubtaskStore.create(tmp_path / "store", StoreSettings(), entries)


def test_a_step_commits_at_once_and_a_retry_rolls_it_back(tmp_path: Path) -> None:
    store = _store(tmp_path)
    start = store.token(0)
    assert start.version == 0
    after = store.commit_step(
        start,
        [(state_key(1, b"a"), b"A0", b"A1"), (state_key(7, b"b"), b"B0", None),
         (state_key(3, b"c"), None, b"C1")],
    )  # fmt: skip
    assert after.version == 1 and store.matches(after)
    assert list(store.entries(0, 10)) == [(1, b"a", b"A1"), (3, b"c", b"C1")]
    # The task of that step runs again (its first attempt died after the batch):
    store.prepare_step(start)
    assert store.matches(start)
    assert list(store.entries(0, 10)) == [(1, b"a", b"A0"), (7, b"b", b"B0")]
    store.close()


def test_a_store_of_another_instance_or_version_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    token = store.token(0)
    with pytest.raises(StoreMismatch, match="instance"):
        store.prepare_step(StoreToken(0, 0, "someone-else"))
    two = store.commit_step(store.commit_step(token, []), [])
    assert two.version == 2
    with pytest.raises(StoreMismatch, match="version 2"):
        store.prepare_step(token)
    store.close()


def test_key_group_ranges_are_contiguous_key_ranges(tmp_path: Path) -> None:
    entries = [(state_key(g, b"k%d" % g), b"v") for g in (0, 5, 255, 256, 300, 32767)]
    store = SubtaskStore.create(tmp_path / "s", StoreSettings(), reversed(entries))
    assert [g for g, _, _ in store.entries(5, 256)] == [5, 255, 256]
    assert [g for g, _, _ in store.entries(0, 32767)] == [0, 5, 255, 256, 300, 32767]
    store.close()


def test_backend_names_are_checked() -> None:
    assert state_backend("rocksdb").on_disk
    with pytest.raises(ValueError, match="'disk' is unknown"):
        StateBackend("disk")  # type: ignore[arg-type]


# -- on Spark, in this process (local[2]) -----------------------------------------------


def _run(
    spark: Any, tmp_path: Path, parallelism: int, backend: str, *, epochs: int | None
) -> PipelineDriver:
    """Restore (if there is a checkpoint), run ``epochs`` epochs (all if None), take a
    checkpoint, and stop without clean-up after one more epoch (a crash)."""
    p = support.pipeline("rocks", tmp_path / "out", parallelism).with_state_backend(backend)
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL))
    driver.start()
    if epochs is None:
        driver.run()
        driver.finish()
    else:
        driver.run(max_epochs=epochs)
        cid = driver.channel.trigger_checkpoint()
        driver.run(max_epochs=1)
        assert cid in driver.status.acknowledged
        driver.run(max_epochs=1)  # never committed: the next run redoes it
    driver.close()
    return driver


def test_rescale_4_3_6_on_the_on_disk_backend(spark: Any, tmp_path: Path) -> None:
    _run(spark, tmp_path, 4, "rocksdb", epochs=1)
    assert _run(spark, tmp_path, 3, "rocksdb", epochs=1).status.restored_from == 1
    last = _run(spark, tmp_path, 6, "rocksdb", epochs=None)
    assert last.status.restored_from == 2
    # The state lived in stores on the executor's local disk, one per subtask.
    runs = Path(tempfile.gettempdir(), "sparkpoint-state", "rocks").glob("*/process")
    assert [str(i) for i in range(6)] in [sorted(p.name for p in run.iterdir()) for run in runs]
    assert support.committed(support.pipeline("rocks", tmp_path / "out", 6)) == support.expected()


def test_checkpoints_restore_across_backends(spark: Any, tmp_path: Path) -> None:
    _run(spark, tmp_path, 4, "rocksdb", epochs=1)
    _run(spark, tmp_path, 2, "memory", epochs=1)
    _run(spark, tmp_path, 3, "rocksdb", epochs=None)
    assert support.committed(support.pipeline("rocks", tmp_path / "out", 3)) == support.expected()


# -- real executor processes (local-cluster) ----------------------------------------------


@pytest.mark.slow
def test_workers_killed_before_and_after_the_write_batch(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    with log.open("wb") as f:
        code = subprocess.call(
            [sys.executable, "-m", "tests.pipeline.state.rocks_faults", str(tmp_path)],
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    assert code == 0, log.read_text()[-4000:]
    fired = sorted(p.name for p in (tmp_path / "faults").iterdir())
    assert fired == [f"after-{rocks_faults.AFTER_EPOCH}", f"mid-{rocks_faults.MID_EPOCH}"]
    committed = sorted(TransactionalFileSink(str(tmp_path / "out")).committed_lines())
    assert committed == expected_output(rocks_faults.source().all_records())


def test_checkpoints_of_the_on_disk_backend_are_incremental(spark: Any, tmp_path: Path) -> None:
    from sparkpoint.checkpoint import IncrementalKeyedStateHandle
    from sparkpoint.storage import load_metadata
    from sparkpoint.storage.local import LocalFileSystem
    from sparkpoint.storage.shared_files import (
        check_shared_files,
        list_shared_files,
        shared_directory,
    )

    p = support.pipeline("incr", tmp_path / "out", 2).with_state_backend("rocksdb")
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL, max_retained=2)
    driver = PipelineDriver(p, spark, channel)
    driver.start()
    checkpoints = []
    for _ in range(2):
        driver.run(max_epochs=1)
        cid = channel.trigger_checkpoint()
        driver.run(max_epochs=1)
        driver.run(max_epochs=1)  # its heartbeat brings the completion
        assert cid in driver.status.completed
        checkpoints.append(load_metadata(str(tmp_path / "ckpt" / "incr" / f"chk-{cid}")))
    driver.close()
    for c in checkpoints:
        for subtask in c.checkpoint.operator_states["process"].subtask_states.values():
            assert isinstance(subtask.keyed[0], IncrementalKeyedStateHandle)
    # Checkpointed size: what each one uploaded — the first everything, the second its
    # private files and the SST files the first did not have (docs/ui.md). (State this
    # small is rewritten by compaction between them; a store that keeps its files:
    # tests/pipeline/state/test_checkpointed_size.py.)
    first, second = (c.checkpoint.operator_states["process"].subtask_states for c in checkpoints)
    assert first[0].checkpointed_size == first[0].state_size
    for index, subtask in second.items():
        handle, base = subtask.keyed[0], first[index].keyed[0]
        assert isinstance(handle, IncrementalKeyedStateHandle)
        assert isinstance(base, IncrementalKeyedStateHandle)
        uploaded = {f.stream for f in handle.shared} - {f.stream for f in base.shared}
        assert handle.reused == {f.name for f in handle.shared if f.stream not in uploaded}
        on_disk = sum(Path(s.path).stat().st_size for s in uploaded)  # type: ignore[union-attr]
        assert handle.checkpointed_size == on_disk + sum(f.stream.size for f in handle.private)
    shared = shared_directory(str(tmp_path / "ckpt"), "incr")
    report = check_shared_files(
        shared,
        list_shared_files(LocalFileSystem(), shared),
        [c.checkpoint for c in checkpoints],
        now_ms=0,
        grace_ms=1,
    )
    assert report.referenced and not report.missing and not report.garbage


def test_a_snapshot_uploads_only_files_its_base_lacks(tmp_path: Path) -> None:
    from sparkpoint.checkpoint import KeyGroupRange
    from sparkpoint.pipeline.state.rocksdb.files import entries_of, restore_whole, snapshot_store
    from sparkpoint.storage import CheckpointLocation
    from sparkpoint.storage.local import LocalFileSystem

    def location(cid: int) -> CheckpointLocation:
        directory = str(tmp_path / "ckpt" / "job" / f"chk-{cid}")
        return CheckpointLocation(LocalFileSystem(), directory, "job", cid, False, 1024)

    groups = KeyGroupRange(0, 127)
    entries = [(state_key(g % 128, b"key-%07d" % g), bytes(100)) for g in range(20_000)]
    store = SubtaskStore.create(tmp_path / "store", StoreSettings(), sorted(entries))
    first, written_first = snapshot_store(store, location(1), "p", 0, 0, groups, None)
    store.commit_step(store.token(0), [(state_key(5, b"key-0000005"), bytes(100), b"changed")])
    store.close()
    store = SubtaskStore(tmp_path / "store", StoreSettings())  # reopening flushes the step
    second, written_second = snapshot_store(store, location(2), "p", 0, 0, groups, first)
    instance = store.instance
    store.close()
    assert {f.stream for f in first.shared} <= {f.stream for f in second.shared}
    assert written_second * 20 < written_first, (written_first, written_second)
    # Both restore: whole (same parallelism) and by key-group range (a rescale).
    restored = restore_whole(second, tmp_path / "restored", StoreSettings())
    assert restored.instance == instance
    assert dict(((g, k), v) for g, k, v in restored.entries(0, 127))[(5, b"key-0000005")] == (
        b"changed"
    )
    restored.close()
    part = second.intersection(KeyGroupRange(0, 9))
    assert part is not None
    assert {g for g, _, _ in entries_of(part, tmp_path)} == set(range(10))
