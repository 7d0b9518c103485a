"""The checkpoint layout on each filesystem: locations, state streams, `_metadata`
commits, reading pointers, discard and orphans."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from sparkpoint.checkpoint import (
    CheckpointKind,
    CheckpointPointer,
    CompletedCheckpoint,
    FileStateHandle,
    InlineStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
)
from sparkpoint.metadata import MetadataError, metadata_checksum
from sparkpoint.storage import (
    CheckpointLocation,
    CheckpointStorage,
    FileAlreadyExists,
    FileNotFound,
    PathOutsideRoot,
    StorageError,
)
from sparkpoint.store.api import CheckpointDiscarder

JOB = "clicks"


@pytest.fixture
def storage(base_dir: str, fs_options: dict[str, Any]) -> CheckpointStorage:
    return CheckpointStorage(
        f"{base_dir}/checkpoints",
        savepoint_dir=f"{base_dir}/savepoints",
        inline_threshold=64,
        **fs_options,
    )


def write_keyed_state(location: CheckpointLocation, subtask: int, groups: KeyGroupRange) -> Any:
    """Write one record per key group, as a keyed subtask does; return its handle."""
    offsets = []
    with location.state_output("counts", subtask, 0) as out:
        for group in groups:
            offsets.append(out.tell())
            out.write(f"group {group} of subtask {subtask};".encode())
        stream = out.close_and_get_handle()
    return KeyGroupsStateHandle(groups, tuple(offsets), stream)


def make_checkpoint(location: CheckpointLocation, checkpoint_id: int) -> CompletedCheckpoint:
    ranges = (KeyGroupRange(0, 63), KeyGroupRange(64, 127))
    subtasks = {
        i: OperatorSubtaskState(keyed=(write_keyed_state(location, i, r),))
        for i, r in enumerate(ranges)
    }
    return CompletedCheckpoint(
        job_id=JOB,
        checkpoint_id=checkpoint_id,
        kind=CheckpointKind.SAVEPOINT if location.is_savepoint else CheckpointKind.CHECKPOINT,
        trigger_timestamp_ms=1_000,
        completion_timestamp_ms=1_500,
        operator_states={"counts": OperatorState("counts", 2, 128, subtasks)},
    )


def pointer_for(storage: CheckpointStorage, checkpoint_id: int) -> CheckpointPointer:
    directory = storage.checkpoint_directory(JOB, checkpoint_id)
    return CheckpointPointer(
        JOB, checkpoint_id, CheckpointKind.CHECKPOINT, 1, 2, f"{directory}/_metadata"
    )


def test_storage_is_a_discarder(storage: CheckpointStorage) -> None:
    assert isinstance(storage, CheckpointDiscarder)


def test_location_layout(storage: CheckpointStorage, base_dir: str) -> None:
    location = storage.init_checkpoint(JOB, 7)
    assert location.directory == f"{base_dir}/checkpoints/{JOB}/chk-7"
    assert location.metadata_uri == f"{location.directory}/_metadata"
    assert not location.is_savepoint
    fs = storage.filesystem(base_dir)
    assert fs.status(location.directory).is_dir
    assert fs.status(f"{base_dir}/checkpoints/{JOB}/shared").is_dir


def test_small_state_is_inline_and_large_state_a_file(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 1)
    small = location.state_output("op", 0, 0)
    small.write(b"x" * 63)
    assert small.close_and_get_handle() == InlineStateHandle("op-0-0", b"x" * 63)
    fs = storage.filesystem(location.directory)
    assert not fs.exists(f"{location.directory}/op-0-0")

    large = location.state_output("op", 1, 0)
    for _ in range(10):
        large.write(b"y" * 10)
    assert large.tell() == 100
    handle = large.close_and_get_handle()
    assert handle == FileStateHandle(f"{location.directory}/op-1-0", 100)
    assert fs.read(handle.path) == b"y" * 100


def test_state_files_are_unique_per_attempt(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 1)
    for attempt in (0, 1):
        with location.state_output("op", 0, attempt) as out:
            out.write(bytes(100))
            out.close_and_get_handle()
    with pytest.raises(FileAlreadyExists):  # same attempt again
        out = location.state_output("op", 0, 1)
        out.write(bytes(100))
        out.close_and_get_handle()
    names = [s.name for s in storage.filesystem(location.directory).list(location.directory)]
    assert names == ["op-0-0", "op-0-1"]


def test_operator_uids_that_would_escape_are_refused(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 1)
    for uid in ("a/b", "..", ".hidden", ""):
        with pytest.raises(PathOutsideRoot):
            location.state_output(uid, 0, 0)


def test_commit_then_read_back_by_every_kind_of_pointer(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 3)
    checkpoint = make_checkpoint(location, 3)
    committed = location.commit_metadata(checkpoint)
    data = storage.filesystem(location.directory).read(location.metadata_uri)
    assert committed.uri == location.metadata_uri
    assert (committed.size, committed.checksum) == (len(data), metadata_checksum(data))
    for pointer in (location.directory, location.metadata_uri, location.directory + "/"):
        assert storage.read_metadata(pointer) == checkpoint
        assert storage.resolve_metadata_uri(pointer) == location.metadata_uri
    assert storage.list_checkpoints(JOB, completed_only=True) == [3]
    assert all(check.ok for check in storage.verify(checkpoint))


def test_commit_over_an_existing_metadata_is_refused(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 3)
    checkpoint = make_checkpoint(location, 3)
    location.commit_metadata(checkpoint)
    fs = storage.filesystem(location.directory)
    before = fs.read(location.metadata_uri)
    with pytest.raises(FileAlreadyExists):
        location.commit_metadata(checkpoint)
    with pytest.raises(FileAlreadyExists):
        storage.init_checkpoint(JOB, 3)  # ids are never reused
    assert fs.read(location.metadata_uri) == before
    assert not [s for s in fs.list(location.directory) if s.name.startswith(".")]


def test_commit_of_a_foreign_checkpoint_is_refused(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 3)
    checkpoint = make_checkpoint(location, 4)
    with pytest.raises(StorageError, match="checkpoint 4 is not 3"):
        location.commit_metadata(checkpoint)
    assert not storage.filesystem(location.directory).exists(location.metadata_uri)


def test_damaged_metadata_names_the_file(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 5)
    fs = storage.filesystem(location.directory)
    fs.write_atomic(location.metadata_uri, b"\x89SPKMD\r\n\x00\x01")
    with pytest.raises(MetadataError) as caught:
        storage.read_metadata(location.directory)
    assert caught.value.path == location.metadata_uri
    assert "truncated" in caught.value.defect


def test_missing_pointer(storage: CheckpointStorage, base_dir: str) -> None:
    with pytest.raises(FileNotFound, match="no checkpoint or savepoint at"):
        storage.read_metadata(f"{base_dir}/checkpoints/{JOB}/chk-99")


def test_savepoint_is_relocatable(storage: CheckpointStorage, base_dir: str) -> None:
    location = storage.init_savepoint(JOB)
    name = location.directory.rsplit("/", 1)[1]
    assert name.startswith(f"savepoint-{JOB[:6]}-") and len(name) == len("savepoint-clicks-") + 12
    assert location.is_savepoint
    checkpoint = make_checkpoint(location, 9)
    location.commit_metadata(checkpoint)
    fs = storage.filesystem(base_dir)
    moved = f"{base_dir}/elsewhere/{name}"
    fs.mkdirs(f"{base_dir}/elsewhere")
    fs.rename(location.directory, moved)

    restored = storage.read_metadata(moved)
    handle = restored.operator_states["counts"].subtask_states[1].keyed[0]
    assert isinstance(handle.stream, FileStateHandle)
    assert handle.stream.path == f"{moved}/counts-1-0"
    # Seek straight to key group 100 with its offset, as a recovering reader does.
    start, end = handle.offset_of(100), handle.offset_of(101)
    assert fs.read_range(handle.stream.path, start, end - start) == b"group 100 of subtask 1;"


def test_savepoint_into_an_explicit_directory(storage: CheckpointStorage, base_dir: str) -> None:
    location = storage.init_savepoint(JOB, target_dir=f"{base_dir}/mine")
    assert location.directory.startswith(f"{base_dir}/mine/savepoint-clicks-")


def test_savepoint_without_any_directory_is_refused(base_dir: str, fs_options: Any) -> None:
    storage = CheckpointStorage(f"{base_dir}/checkpoints", **fs_options)
    with pytest.raises(StorageError, match="no savepoint directory configured"):
        storage.init_savepoint(JOB)


def test_discard_deletes_exactly_the_checkpoint_directory(storage: CheckpointStorage) -> None:
    keep = storage.init_checkpoint(JOB, 1)
    keep.commit_metadata(make_checkpoint(keep, 1))
    gone = storage.init_checkpoint(JOB, 2)
    gone.commit_metadata(make_checkpoint(gone, 2))
    fs = storage.filesystem(gone.directory)
    fs.create_exclusive(f"{storage.job_directory(JOB)}/shared/blob", b"shared")

    storage.discard(pointer_for(storage, 2))
    storage.discard(pointer_for(storage, 2))  # idempotent
    assert storage.list_checkpoints(JOB) == [1]
    assert fs.read(f"{storage.job_directory(JOB)}/shared/blob") == b"shared"
    assert storage.read_metadata(keep.directory).checkpoint_id == 1


def test_discard_refuses_savepoints_and_foreign_pointers(
    storage: CheckpointStorage, base_dir: str
) -> None:
    location = storage.init_checkpoint(JOB, 1)
    location.commit_metadata(make_checkpoint(location, 1))
    savepoint = CheckpointPointer(
        JOB, 1, CheckpointKind.SAVEPOINT, 1, 2, f"{location.directory}/_metadata"
    )
    with pytest.raises(StorageError, match="savepoints belong to their user"):
        storage.discard(savepoint)
    foreign = CheckpointPointer(
        JOB, 1, CheckpointKind.CHECKPOINT, 1, 2, f"{base_dir}/savepoints/x/_metadata"
    )
    with pytest.raises(PathOutsideRoot):
        storage.discard(foreign)
    wrong_id = CheckpointPointer(
        JOB, 2, CheckpointKind.CHECKPOINT, 1, 2, f"{location.directory}/_metadata"
    )
    with pytest.raises(PathOutsideRoot):
        storage.discard(wrong_id)
    assert storage.list_checkpoints(JOB, completed_only=True) == [1]


def test_crash_before_metadata_leaves_an_orphan_the_collector_removes(
    storage: CheckpointStorage,
) -> None:
    for checkpoint_id in (1, 2):
        location = storage.init_checkpoint(JOB, checkpoint_id)
        location.commit_metadata(make_checkpoint(location, checkpoint_id))
    crashed = storage.init_checkpoint(JOB, 3)
    make_checkpoint(crashed, 3)  # state files written, then the coordinator died
    pending = storage.init_checkpoint(JOB, 4)  # in flight: at or above next id
    fs = storage.filesystem(crashed.directory)
    fs.create_exclusive(f"{storage.job_directory(JOB)}/shared/blob", b"s")

    # The store retains checkpoint 2; 1 was subsumed but its discard never ran.
    assert storage.list_checkpoints(JOB) == [1, 2, 3, 4]
    assert storage.list_checkpoints(JOB, completed_only=True) == [1, 2]
    orphans = storage.collect_orphans(JOB, retained_ids={2}, next_checkpoint_id=4)
    assert orphans == [storage.checkpoint_directory(JOB, i) for i in (1, 3)]
    assert storage.list_checkpoints(JOB) == [1, 2, 3, 4]  # dry run by default

    deleted = storage.collect_orphans(JOB, retained_ids={2}, next_checkpoint_id=4, dry_run=False)
    assert deleted == orphans
    assert storage.list_checkpoints(JOB) == [2, 4]
    assert fs.exists(pending.directory)
    assert fs.read(f"{storage.job_directory(JOB)}/shared/blob") == b"s"
    assert storage.collect_orphans(JOB, retained_ids={2}, next_checkpoint_id=4) == []


def test_a_running_jobs_newest_directories_are_kept_and_age_counts(
    storage: CheckpointStorage,
) -> None:
    for checkpoint_id in (1, 2, 3, 4, 5):
        storage.init_checkpoint(JOB, checkpoint_id)
    done = storage.init_checkpoint(JOB, 2)
    done.commit_metadata(make_checkpoint(done, 2))
    make_checkpoint(storage.init_checkpoint(JOB, 3), 3)  # state files, no _metadata
    make_checkpoint(storage.init_checkpoint(JOB, 4), 4)  # the driver's latest snapshot
    # 5: triggered, nothing written yet. 6 is pending: the limit is 6.
    everything = storage.find_orphans(JOB, retained_ids={2}, next_checkpoint_id=6)
    assert [o.checkpoint_id for o in everything] == [1, 3, 4, 5]
    assert everything[1].size_bytes > 0 and everything[0].size_bytes == 0
    running = storage.find_orphans(JOB, retained_ids={2}, next_checkpoint_id=6, keep_newest=True)
    assert [o.checkpoint_id for o in running] == [1, 3]
    newest = max(o.modified_ms for o in everything)
    assert (
        storage.find_orphans(
            JOB, retained_ids={2}, next_checkpoint_id=6, min_age_ms=60_000, now_ms=newest + 1
        )
        == []
    )


def test_orphans_of_an_unknown_job(storage: CheckpointStorage) -> None:
    assert storage.collect_orphans("never-ran", retained_ids=set(), next_checkpoint_id=9) == []
    assert storage.list_checkpoints("never-ran") == []


def test_location_travels_to_an_executor(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 1)
    with location.state_output("op", 0, 0) as out:  # the driver used its connection
        out.write(bytes(80))
        out.close_and_get_handle()
    remote = pickle.loads(pickle.dumps(location))
    with remote.state_output("op", 1, 0) as out:
        out.write(bytes(90))
        handle = out.close_and_get_handle()
    assert storage.filesystem(handle.path).status(handle.path).size == 90  # type: ignore[union-attr]


def test_paths_with_dot_dot_are_refused(base_dir: str, fs_options: Any) -> None:
    with pytest.raises(PathOutsideRoot):
        CheckpointStorage(f"{base_dir}/checkpoints/../elsewhere", **fs_options)
    storage = CheckpointStorage(f"{base_dir}/checkpoints", **fs_options)
    with pytest.raises(PathOutsideRoot):
        storage.init_savepoint(JOB, target_dir=f"{base_dir}/../../tmp")
    with pytest.raises(PathOutsideRoot):
        storage.read_metadata(f"{base_dir}/checkpoints/../x/_metadata")


def test_verify_finds_missing_and_resized_files(storage: CheckpointStorage) -> None:
    location = storage.init_checkpoint(JOB, 1)
    checkpoint = make_checkpoint(location, 1)
    fs = storage.filesystem(location.directory)
    fs.delete(f"{location.directory}/counts-0-0")
    fs.delete(f"{location.directory}/counts-1-0")
    fs.create_exclusive(f"{location.directory}/counts-1-0", b"short")
    problems = {c.path.rsplit("/", 1)[1]: c.problem for c in storage.verify(checkpoint)}
    assert problems["counts-0-0"] == "missing"
    assert problems["counts-1-0"] is not None and problems["counts-1-0"].startswith("size 5,")
