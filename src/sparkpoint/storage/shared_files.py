"""Files under ``<job>/shared/`` (incremental keyed state, docs/state-files.md): which
checkpoint references which, what is missing, and what is garbage.

References are derived, never stored: from the checkpoints given (the retained ones as
the store lists them, each read from its `_metadata`), so a new leader rebuilds them by
reading what it retains, and from the subtask states the leader holds (``held``: the
acknowledgements of its pending checkpoints and of the newest snapshot a driver had
acknowledged, docs/state-files.md). A shared file is garbage when none of those
references it and it has been unreferenced for the grace period. "Unreferenced since" is
when a collector first saw the file unreferenced in its term (a new leader starts
counting afresh), never earlier than the file's own modification time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import (
    CheckpointPointer,
    CompletedCheckpoint,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    OperatorSubtaskState,
)
from sparkpoint.metadata import decode_metadata
from sparkpoint.storage.checkpoint_storage import CheckpointStorage
from sparkpoint.storage.errors import FileNotFound
from sparkpoint.storage.filesystem import FileStatus, FileSystem
from sparkpoint.storage.location import SHARED_DIR
from sparkpoint.storage.uri import parse


def _key(path: str) -> str:
    """Paths compare by their path part: ``file:///a/b`` and ``/a/b`` are one file."""
    return parse(path).path


def shared_directory(checkpoint_dir: str, job_id: str) -> str:
    return str(parse(checkpoint_dir).child(job_id).child(SHARED_DIR))


def shared_paths(states: Iterable[OperatorSubtaskState]) -> set[str]:
    """The shared files that subtask states reference."""
    return {
        f.stream.path
        for subtask in states
        for handle in subtask.keyed
        if isinstance(handle, IncrementalKeyedStateHandle)
        for f in handle.shared
        if isinstance(f.stream, FileStateHandle)
    }


def shared_references(checkpoints: Iterable[CompletedCheckpoint]) -> dict[str, tuple[int, ...]]:
    """Path of every shared file → the ids of the checkpoints that reference it."""
    found: dict[str, set[int]] = {}
    for checkpoint in checkpoints:
        for state in checkpoint.operator_states.values():
            for path in shared_paths(state.subtask_states.values()):
                found.setdefault(path, set()).add(checkpoint.checkpoint_id)
    return {path: tuple(sorted(ids)) for path, ids in sorted(found.items())}


@dataclass(frozen=True, slots=True)
class SharedFilesReport:
    """``missing``: referenced but not there (state that cannot be restored).
    ``garbage``: unreferenced for the grace period (to delete). ``young``: unreferenced,
    not yet for the grace period (kept)."""

    directory: str
    referenced: Mapping[str, tuple[int, ...]]
    missing: tuple[str, ...]
    garbage: tuple[FileStatus, ...]
    young: tuple[FileStatus, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.garbage

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "referenced": len(self.referenced),
            "missing": [{"path": p, "checkpoints": list(self.referenced[p])} for p in self.missing],
            "garbage": [{"path": f.path, "size_bytes": f.size} for f in self.garbage],
            "garbage_bytes": sum(f.size for f in self.garbage),
            "young": [{"path": f.path, "size_bytes": f.size} for f in self.young],
        }


def list_shared_files(fs: FileSystem, directory: str) -> list[FileStatus]:
    try:
        return [f for f in fs.list(directory) if not f.is_dir]
    except FileNotFound:
        return []


def read_checkpoint(fs: FileSystem, metadata_uri: str) -> CompletedCheckpoint:
    """The checkpoint a `_metadata` describes (relative state paths under its directory)."""
    base = str(parse(metadata_uri).parent)
    return decode_metadata(fs.read(metadata_uri), source=metadata_uri, base_dir=base)


def check_job_shared_files(
    fs: FileSystem,
    checkpoint_dir: str,
    job_id: str,
    checkpoints: Iterable[CompletedCheckpoint],
    *,
    now_ms: int,
    grace_ms: float,
) -> SharedFilesReport:
    """:func:`check_shared_files` on the job's ``shared/`` as it is listed now: what
    ``sparkpoint checkpoints shared-check`` and the drills report."""
    directory = shared_directory(checkpoint_dir, job_id)
    listing = list_shared_files(fs, directory)
    return check_shared_files(directory, listing, checkpoints, now_ms=now_ms, grace_ms=grace_ms)


def check_shared_files(
    directory: str,
    listing: Iterable[FileStatus],
    checkpoints: Iterable[CompletedCheckpoint],
    *,
    now_ms: int,
    grace_ms: float,
    unreferenced_since: Mapping[str, int] | None = None,
    held: Iterable[str] = (),
) -> SharedFilesReport:
    """Compare the files of ``directory`` with what ``checkpoints`` reference; files in
    ``held`` (paths a checkpoint not yet completed references) are neither garbage nor
    young, and not reported missing either (nothing restorable needs them yet).

    >>> check_shared_files("/c/j/shared", [], [], now_ms=0, grace_ms=1).ok
    True
    """
    referenced = shared_references(checkpoints)
    present = {_key(f.path): f for f in listing}
    wanted = {_key(p): p for p in referenced}
    missing = tuple(sorted(p for k, p in wanted.items() if k not in present))
    kept = {_key(p) for p in held}
    garbage, young = [], []
    since = unreferenced_since or {}
    for key, status in sorted(present.items()):
        if key in wanted or key in kept:
            continue
        start = max(status.modification_time_ms, since.get(key, status.modification_time_ms))
        (garbage if now_ms - start >= grace_ms else young).append(status)
    return SharedFilesReport(directory, referenced, missing, tuple(garbage), tuple(young))


class SharedFileCollector:
    """The leader's collector of one term for ``shared/``: remembers since when each
    file is unreferenced (in this term), and deletes what stayed so for the grace
    period. Paths refused unless they are directly under the job's ``shared/``."""

    def __init__(self) -> None:
        self._unreferenced_since: dict[str, dict[str, int]] = {}

    def collect(
        self,
        fs: FileSystem,
        checkpoint_dir: str,
        job_id: str,
        retained: Iterable[CompletedCheckpoint],
        *,
        now_ms: int,
        grace_ms: float,
        dry_run: bool,
        held: Iterable[OperatorSubtaskState] = (),
    ) -> SharedFilesReport:
        """``held``: subtask states of checkpoints not completed (yet) whose files are
        kept as if retained (see the module docstring)."""
        retained = list(retained)
        held_paths = shared_paths(held)
        directory = shared_directory(checkpoint_dir, job_id)
        listing = list_shared_files(fs, directory)
        referenced = {_key(p) for p in shared_references(retained)}
        referenced |= {_key(p) for p in held_paths}
        seen = self._unreferenced_since.setdefault(job_id, {})
        for stale in [k for k in seen if k in referenced]:
            del seen[stale]
        for f in listing:
            if _key(f.path) not in referenced:
                seen.setdefault(_key(f.path), now_ms)
        report = check_shared_files(
            directory,
            listing,
            retained,
            now_ms=now_ms,
            grace_ms=grace_ms,
            unreferenced_since=seen,
            held=held_paths,
        )
        if not dry_run:
            root = _key(directory).rstrip("/") + "/"
            for f in report.garbage:
                key = _key(f.path)
                if key.startswith(root) and "/" not in key[len(root) :]:
                    fs.delete(f.path)
                    seen.pop(key, None)
        return report

    def collect_job(
        self,
        storage: CheckpointStorage,
        job_id: str,
        retained: Iterable[CheckpointPointer],
        *,
        now_ms: int,
        grace_ms: float,
        dry_run: bool,
        held: Iterable[OperatorSubtaskState] = (),
    ) -> SharedFilesReport:
        """As :meth:`collect`, reading each retained checkpoint's `_metadata` (one per
        id; the pointers may come from several reads of the store)."""
        checkpoints = [
            read_checkpoint(storage.filesystem(pointer.metadata_uri), pointer.metadata_uri)
            for pointer in {p.checkpoint_id: p for p in retained}.values()
        ]
        return self.collect(
            storage.filesystem(storage.checkpoint_dir),
            storage.checkpoint_dir,
            job_id,
            checkpoints,
            now_ms=now_ms,
            grace_ms=grace_ms,
            dry_run=dry_run,
            held=held,
        )


def ended_job_shared_files(
    storage: CheckpointStorage, job_id: str, *, ended_ms: int
) -> list[FileStatus]:
    """The files of an ended job's ``shared/`` written before it ended (``ended_ms``):
    nothing restorable references them any more (its store is gone and savepoints are
    always full). Files written later belong to the job registered again under the same
    id (its uploads follow its registration, which follows the end) and stay for that
    run's collector."""
    fs = storage.filesystem(storage.checkpoint_dir)
    directory = shared_directory(storage.checkpoint_dir, job_id)
    root = _key(directory).rstrip("/") + "/"
    found = []
    for f in list_shared_files(fs, directory):
        key = _key(f.path)
        directly_under = key.startswith(root) and "/" not in key[len(root) :]
        if f.modification_time_ms <= ended_ms and directly_under:
            found.append(f)
    return found


def remove_ended_job_shared_files(
    storage: CheckpointStorage, job_id: str, *, ended_ms: int
) -> list[FileStatus]:
    """Delete :func:`ended_job_shared_files`; returns what was deleted."""
    fs = storage.filesystem(storage.checkpoint_dir)
    found = ended_job_shared_files(storage, job_id, ended_ms=ended_ms)
    for f in found:
        fs.delete(f.path)
    return found
