"""Loading through real storage: pointers of every kind, rescaled restores, fallbacks."""

from __future__ import annotations

import logging
import pickle
import shutil
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    JobGraph,
    OperatorSpec,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.recovery import (
    CheckpointLoadError,
    NoRestorableCheckpointError,
    plan_restore,
)
from sparkpoint.recovery.loading import load_checkpoint, load_latest_checkpoint
from sparkpoint.recovery.reader import read_subtask_keyed_state
from sparkpoint.statefiles.writers import write_keyed_state
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store.standalone import StandaloneCompletedCheckpointStore
from tests.recovery.support import pointer_for, write_keyed_checkpoint

STATE = {f"user-{i}": pickle.dumps({"clicks": i}) for i in range(2000)} | {
    (i, "t"): pickle.dumps(i) for i in range(300)
}


def _restore_all(storage: CheckpointStorage, pointer: str, parallelism: int) -> dict[object, bytes]:
    loaded = load_checkpoint(storage, pointer)
    graph = JobGraph("clicks", (OperatorSpec("count", parallelism, 128, keyed=True),))
    plan = plan_restore(loaded.checkpoint, graph)
    restored: dict[object, bytes] = {}
    for subtask in plan.operators["count"].subtasks:
        for _, key, value in read_subtask_keyed_state(
            subtask, storage.filesystem, max_parallelism=128
        ):
            assert key not in restored
            restored[key] = value
    return restored


@pytest.mark.parametrize("new_parallelism", [1, 2, 7, 128])
def test_written_at_3_restored_through_storage(tmp_path: Path, new_parallelism: int) -> None:
    # Threshold 0: every snapshot is a real file; the default inlines none of these either.
    storage = CheckpointStorage(str(tmp_path / "ckpt"), inline_threshold=0)
    checkpoint, committed = write_keyed_checkpoint(storage.init_checkpoint("clicks", 9), STATE)
    assert all(
        not hasattr(h.stream, "data")
        for s in checkpoint.operator_states["count"].subtask_states.values()
        for h in s.keyed
    )
    for pointer in (committed.uri, str(Path(committed.uri).parent)):
        assert _restore_all(storage, pointer, new_parallelism) == STATE


def test_small_state_inlined_in_metadata_restores_too(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path / "ckpt"))
    small = {f"k{i}": b"v" for i in range(20)}
    checkpoint, committed = write_keyed_checkpoint(storage.init_checkpoint("clicks", 1), small)
    streams = [
        h.stream
        for s in checkpoint.operator_states["count"].subtask_states.values()
        for h in s.keyed
    ]
    assert all(hasattr(s, "data") for s in streams)
    assert _restore_all(storage, committed.uri, 5) == small


def test_a_moved_savepoint_restores(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path / "ckpt"), inline_threshold=0)
    location = storage.init_savepoint("clicks", str(tmp_path / "savepoints"))
    write_keyed_checkpoint(location, STATE, checkpoint_id=12)
    moved = tmp_path / "elsewhere" / "sp"
    shutil.move(location.directory, moved)
    assert _restore_all(storage, str(moved), 4) == STATE


def _fallbacks(job: str) -> float:
    return REGISTRY.get_sample_value("sparkpoint_restore_fallbacks_total", {"job_id": job}) or 0.0


def _store_with(storage: CheckpointStorage, job: str, ids: list[int]):  # type: ignore[no-untyped-def]
    store = StandaloneCompletedCheckpointStore(max_retained=len(ids))
    for cid in ids:
        state = {f"k{i}": str(cid).encode() for i in range(50)}
        checkpoint, committed = write_keyed_checkpoint(storage.init_checkpoint(job, cid), state)
        store.add_checkpoint_and_subsume_oldest(pointer_for(checkpoint, committed))
    return store


def _metadata(storage: CheckpointStorage, job: str, cid: int) -> Path:
    return Path(storage.checkpoint_directory(job, cid)) / "_metadata"


def test_latest_readable_checkpoint_is_restored(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path))
    store = _store_with(storage, "fine", [1, 2, 3])
    loaded = load_latest_checkpoint(store, storage, "fine")
    assert loaded is not None
    assert loaded.checkpoint.checkpoint_id == 3 and not loaded.fell_back
    assert _fallbacks("fine") == 0


def test_a_corrupted_latest_checkpoint_falls_back_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = CheckpointStorage(str(tmp_path))
    store = _store_with(storage, "flipped", [1, 2, 3])
    path = _metadata(storage, "flipped", 3)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="sparkpoint.recovery.loading"):
        loaded = load_latest_checkpoint(store, storage, "flipped")
    assert loaded is not None
    assert loaded.checkpoint.checkpoint_id == 2
    assert [s.checkpoint_id for s in loaded.skipped] == [3]
    assert "checksum" in loaded.skipped[0].reason and str(path) in loaded.skipped[0].reason
    assert loaded.describe().endswith("after skipping unreadable checkpoint(s) 3")
    assert _fallbacks("flipped") == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith("checkpoint 3 of the store of job flipped cannot be restored")
        for m in messages
    )
    assert any(m.startswith("restoring checkpoint 2 of job flipped") for m in messages)


def test_missing_and_truncated_metadata_fall_back_further(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path))
    store = _store_with(storage, "gone", [4, 5, 6])
    _metadata(storage, "gone", 6).unlink()
    path = _metadata(storage, "gone", 5)
    path.write_bytes(path.read_bytes()[:20])
    loaded = load_latest_checkpoint(store, storage, "gone")
    assert loaded is not None and loaded.checkpoint.checkpoint_id == 4
    assert [s.checkpoint_id for s in loaded.skipped] == [6, 5]
    assert _fallbacks("gone") == 1  # one restore that fell back, however far


def test_the_store_checksum_catches_a_replaced_metadata(tmp_path: Path) -> None:
    # A valid `_metadata`, but not the one the store recorded: refused, not restored.
    storage = CheckpointStorage(str(tmp_path))
    store = _store_with(storage, "swapped", [1, 2])
    _metadata(storage, "swapped", 2).write_bytes(_metadata(storage, "swapped", 1).read_bytes())
    loaded = load_latest_checkpoint(store, storage, "swapped")
    assert loaded is not None and loaded.checkpoint.checkpoint_id == 1
    assert "differs from" in loaded.skipped[0].reason


def test_nothing_readable_is_an_error_listing_every_attempt(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path))
    store = _store_with(storage, "lost", [1, 2])
    for cid in (1, 2):
        _metadata(storage, "lost", cid).write_bytes(b"not metadata")
    with pytest.raises(NoRestorableCheckpointError) as caught:
        load_latest_checkpoint(store, storage, "lost")
    text = str(caught.value)
    assert text.startswith("no checkpoint of the store of job lost can be restored (2 tried):")
    assert "checkpoint 2:" in text and "checkpoint 1:" in text
    assert _fallbacks("lost") == 0


def test_an_empty_store_means_a_fresh_start(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path))
    assert load_latest_checkpoint(StandaloneCompletedCheckpointStore(), storage, "new") is None


def test_a_job_directory_pointer_takes_the_newest_complete_checkpoint(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path))
    _store_with(storage, "dirjob", [7, 8, 9])
    storage.init_checkpoint("dirjob", 10)  # in progress: no `_metadata` yet
    path = _metadata(storage, "dirjob", 9)
    path.write_bytes(path.read_bytes()[:-3])
    loaded = load_checkpoint(storage, storage.job_directory("dirjob"))
    assert loaded.checkpoint.checkpoint_id == 8
    assert [s.checkpoint_id for s in loaded.skipped] == [9]


def test_bad_pointers_name_the_path_and_the_defect(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path))
    missing = str(tmp_path / "nope" / "chk-3")
    with pytest.raises(
        CheckpointLoadError, match=f"cannot load {missing}: no checkpoint or savepoint"
    ):
        load_checkpoint(storage, missing)
    _store_with(storage, "bad", [1])
    path = _metadata(storage, "bad", 1)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(CheckpointLoadError, match=f"cannot load .*: {path}: "):
        load_checkpoint(storage, str(path))


def test_rescale_chain_3_to_128_to_7_to_1(tmp_path: Path) -> None:
    """Each generation restores its share, snapshots it again as its own subtask would
    (only its key groups), and the next generation restores from that."""
    storage = CheckpointStorage(str(tmp_path / "ckpt"))
    _, committed = write_keyed_checkpoint(storage.init_checkpoint("chain", 1), STATE)
    pointer = committed.uri
    for checkpoint_id, parallelism in enumerate([128, 7, 1], start=2):
        loaded = load_checkpoint(storage, pointer)
        graph = JobGraph("chain", (OperatorSpec("count", parallelism, 128, keyed=True),))
        plan = plan_restore(loaded.checkpoint, graph)
        location = storage.init_checkpoint("chain", checkpoint_id)
        subtasks = {}
        for subtask in plan.operators["count"].subtasks:
            share = [
                (key, value)
                for _, key, value in read_subtask_keyed_state(
                    subtask, storage.filesystem, max_parallelism=128
                )
            ]
            handle = write_keyed_state(
                location.state_output("count", subtask.index, 0),
                share,
                subtask.key_group_range,
                128,
            )
            subtasks[subtask.index] = OperatorSubtaskState(keyed=(handle,))
        checkpoint = CompletedCheckpoint(
            "chain",
            checkpoint_id,
            CheckpointKind.CHECKPOINT,
            10,
            20,
            {"count": OperatorState("count", parallelism, 128, subtasks)},
        )
        pointer = location.commit_metadata(checkpoint).uri
    assert _restore_all(storage, pointer, 3) == STATE
