"""Incremental snapshots of a subtask's store, and stores built back from them
(docs/state-files.md, "Incremental keyed state").

A snapshot is a RocksDB checkpoint (hard links of the live SST files plus the manifest
and options): SST files are immutable, so one that the base — the subtask's last
*completed* checkpoint — already uploaded is referenced again; only new SST files are
uploaded, under ``<job>/shared/<uid>-<instance>-<file>-<random>`` (a name never reused,
even by two runs restored from the same checkpoint). The manifest and options belong to
the checkpoint (inline when small). Reuse needs the same store lineage: the base's
``instance`` must be the store's, since SST names count up within one lineage only.

Restoring a handle at unchanged parallelism puts its files back as they were (the store
keeps its instance and goes on from there); after a rescale, each new subtask reads the
entries of its key groups out of every overlapping old store into a new one.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sparkpoint.checkpoint import (
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    StoreFile,
    StreamStateHandle,
)
from sparkpoint.pipeline.state.backend import StoreSettings
from sparkpoint.pipeline.state.rocksdb.client import RemoteStore
from sparkpoint.pipeline.state.rocksdb.store import SubtaskStore
from sparkpoint.recovery.reader import StreamReader
from sparkpoint.storage.location import CheckpointLocation
from sparkpoint.storage.streams import StateOutputStream

CHUNK = 8 * 1024 * 1024


def _upload(source: Path, stream: StateOutputStream) -> StreamStateHandle:
    try:
        with source.open("rb") as f:
            while chunk := f.read(CHUNK):
                stream.write(chunk)
        return stream.close_and_get_handle()
    except BaseException:
        stream.abort()
        raise


def snapshot_store(
    store: SubtaskStore | RemoteStore,
    location: CheckpointLocation,
    operator_uid: str,
    index: int,
    attempt: int,
    key_groups: KeyGroupRange,
    base: IncrementalKeyedStateHandle | None,
) -> tuple[IncrementalKeyedStateHandle, int]:
    """The store's incremental handle, and the bytes this snapshot wrote (the handle's
    ``checkpointed_size``)."""
    instance = store.instance
    reuse = {f.name: f for f in base.shared} if base and base.instance == instance else {}
    scratch = Path(tempfile.mkdtemp(prefix="snapshot-", dir=store.path.parent))
    shared, private, reused, written = [], [], set(), 0
    try:
        target = scratch / "checkpoint"
        store.checkpoint(target)
        for path in sorted(target.iterdir()):
            name = path.name
            if name.endswith(".sst"):
                known = reuse.get(name)
                if known is not None and known.stream.size == path.stat().st_size:
                    shared.append(known)
                    reused.add(name)
                    continue
                unique = f"{operator_uid}-{instance}-{name}-{secrets.token_hex(4)}"
                handle = _upload(path, location.shared_output(unique))
                shared.append(StoreFile(name, handle))
            else:
                handle = _upload(
                    path, location.store_file_output(operator_uid, index, attempt, name)
                )
                private.append(StoreFile(name, handle))
            written += handle.size
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    handle = IncrementalKeyedStateHandle(
        key_groups, key_groups, instance, shared, private, frozenset(reused)
    )
    return handle, written


def _download(handle: IncrementalKeyedStateHandle, target: Path, reader: StreamReader) -> None:
    target.mkdir(parents=True)
    for f in (*handle.shared, *handle.private):
        with (target / f.name).open("wb") as out:
            for offset in range(0, f.stream.size, CHUNK):
                out.write(reader.read(f.stream, offset, min(CHUNK, f.stream.size - offset)))


def restore_whole(
    handle: IncrementalKeyedStateHandle, path: Path, settings: StoreSettings
) -> SubtaskStore:
    """The store exactly as the handle's files have it (unchanged parallelism)."""
    if path.exists():
        shutil.rmtree(path)
    _download(handle, path, StreamReader())
    return SubtaskStore(path, settings)


def entries_of(
    handle: IncrementalKeyedStateHandle, scratch_root: Path
) -> Iterator[tuple[int, bytes, bytes]]:
    """``(key group, key bytes, value)`` of the handle's key groups, read out of a copy
    of its store."""
    scratch = Path(tempfile.mkdtemp(prefix="restore-", dir=scratch_root))
    try:
        _download(handle, scratch / "store", StreamReader())
        old = SubtaskStore(scratch / "store", StoreSettings())
        try:
            yield from old.entries(handle.key_group_range.start, handle.key_group_range.end)
        finally:
            old.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def is_whole(handle: object, key_groups: KeyGroupRange) -> bool:
    """True for an incremental handle that is exactly one old store of these key groups."""
    return (
        isinstance(handle, IncrementalKeyedStateHandle)
        and handle.key_group_range == handle.store_range == key_groups
    )
