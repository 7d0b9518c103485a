"""Checkpoint storage: the directory layout of docs/architecture.md §4 on one filesystem.

::

    <checkpoint-dir>/<job-id>/chk-<id>/_metadata        written last, atomically
    <checkpoint-dir>/<job-id>/chk-<id>/<uid>-<subtask>-<attempt>
    <checkpoint-dir>/<job-id>/shared/                    reserved for incremental state
    <savepoint-dir>/savepoint-<job-id prefix>-<random>/_metadata + state files
"""

from __future__ import annotations

import getpass
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import (
    CheckpointPointer,
    CompletedCheckpoint,
    validate_checkpoint_id,
    validate_job_id,
)
from sparkpoint.storage import reading
from sparkpoint.storage.errors import (
    FileAlreadyExists,
    FileNotFound,
    PathOutsideRoot,
    PermissionDenied,
    StorageError,
)
from sparkpoint.storage.filesystem import FileStatus, FileSystem
from sparkpoint.storage.location import METADATA_FILE_NAME, CheckpointLocation
from sparkpoint.storage.registry import filesystem_for
from sparkpoint.storage.uri import Uri, parse
from sparkpoint.storage.verify import FileCheck, verify_state_files

DEFAULT_INLINE_THRESHOLD = 20 * 1024
SHARED_DIR_NAME = "shared"
_CHECKPOINT_DIR = re.compile(r"^chk-([1-9][0-9]{0,18})$")


def checkpoint_dir_name(checkpoint_id: int) -> str:
    return f"chk-{validate_checkpoint_id(checkpoint_id)}"


class CheckpointStorage:
    """Checkpoints of every job under ``checkpoint_dir``; savepoints under
    ``savepoint_dir`` (or a directory given per savepoint).

    It deletes only inside the directories it owns: a checkpoint directory of a job under
    ``checkpoint_dir``. ``fs_options`` go to :func:`filesystem_for` (HDFS user, timeout, …).

    >>> import tempfile
    >>> storage = CheckpointStorage(tempfile.mkdtemp())
    >>> location = storage.init_checkpoint("clicks", 7)
    >>> location.directory.endswith("/clicks/chk-7"), storage.list_checkpoints("clicks")
    (True, [7])
    """

    def __init__(
        self,
        checkpoint_dir: str,
        *,
        savepoint_dir: str | None = None,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        **fs_options: Any,
    ) -> None:
        if inline_threshold < 0:
            raise StorageError(f"inline threshold {inline_threshold} is negative")
        self._root = parse(checkpoint_dir)
        self._savepoint_root = parse(savepoint_dir) if savepoint_dir else None
        self._inline_threshold = inline_threshold
        self._fs_options = dict(fs_options)
        self._filesystems: dict[tuple[str, str], FileSystem] = {}
        self._fs = self.filesystem(str(self._root))

    @property
    def checkpoint_dir(self) -> str:
        return str(self._root)

    @property
    def savepoint_dir(self) -> str | None:
        return str(self._savepoint_root) if self._savepoint_root else None

    def filesystem(self, uri: str) -> FileSystem:
        """The filesystem of ``uri``, with this storage's options (one per namespace)."""
        parsed = parse(uri)
        key = ("", "") if parsed.scheme in ("", "file") else (parsed.scheme, parsed.authority)
        if key not in self._filesystems:
            self._filesystems[key] = filesystem_for(uri, **self._fs_options)
        return self._filesystems[key]

    # -- layout ---------------------------------------------------------------------

    def job_directory(self, job_id: str) -> str:
        return str(self._root.child(validate_job_id(job_id)))

    def checkpoint_directory(self, job_id: str, checkpoint_id: int) -> str:
        return str(parse(self.job_directory(job_id)).child(checkpoint_dir_name(checkpoint_id)))

    def check_writable(self, job_id: str) -> None:
        """Refuse a job whose checkpoint directory this storage's user may not write:
        at registration, rather than at its first checkpoint. Creates the job's directory
        and a probe file in it (deleted again). Raises :class:`PermissionDenied` naming
        the directory and the user; other failures (an unreachable NameNode) are raised
        as they are."""
        directory = self.job_directory(job_id)
        probe = str(parse(directory).child(f".writable-{secrets.token_hex(6)}"))
        try:
            self._fs.mkdirs(directory)
            self._fs.create_exclusive(probe, b"")
        except PermissionDenied as exc:
            user = getattr(self._fs, "user", None)
            who = f"HDFS user {user!r}" if user else f"user {getpass.getuser()!r}"
            raise PermissionDenied(
                f"checkpoint directory {directory} is not writable by {who}: {exc}",
                path=directory,
            ) from exc
        self._fs.delete(probe)

    def init_checkpoint(self, job_id: str, checkpoint_id: int) -> CheckpointLocation:
        """Create ``chk-<id>`` (and the job's ``shared/``). An id whose `_metadata` exists
        already is refused: ids are never reused."""
        directory = self.checkpoint_directory(job_id, checkpoint_id)
        metadata = str(parse(directory).child(METADATA_FILE_NAME))
        if self._fs.exists(metadata):
            raise FileAlreadyExists(
                f"checkpoint {checkpoint_id} of job {job_id} is complete already: {metadata}",
                path=metadata,
            )
        self._fs.mkdirs(directory)
        self._fs.mkdirs(str(parse(self.job_directory(job_id)).child(SHARED_DIR_NAME)))
        return CheckpointLocation(
            self._fs, directory, job_id, checkpoint_id, False, self._inline_threshold
        )

    def init_savepoint(self, job_id: str, target_dir: str | None = None) -> CheckpointLocation:
        """Create ``savepoint-<first 6 of job id>-<12 random hex>`` under ``target_dir``
        or the configured savepoint directory."""
        validate_job_id(job_id)
        base = parse(target_dir) if target_dir else self._savepoint_root
        if base is None:
            raise StorageError(
                f"savepoint of job {job_id}: no target directory given and no savepoint "
                "directory configured"
            )
        fs = self.filesystem(str(base))
        while True:
            directory = base.child(f"savepoint-{job_id[:6]}-{secrets.token_hex(6)}")
            if not fs.exists(str(directory)):
                break
        fs.mkdirs(str(directory))
        return CheckpointLocation(fs, str(directory), job_id, None, True, self._inline_threshold)

    # -- reading --------------------------------------------------------------------

    def resolve_metadata_uri(self, pointer: str) -> str:
        return reading.resolve_metadata_uri(self.filesystem(pointer), pointer)

    def read_metadata(self, pointer: str, expected_checksum: str = "") -> CompletedCheckpoint:
        """The checkpoint at ``pointer`` (a ``chk-<id>`` directory, a savepoint directory
        or a `_metadata` file; local or HDFS). MetadataError if the file is damaged or
        differs from ``expected_checksum`` (a store pointer's ``metadata_checksum``)."""
        return reading.read_metadata(self.filesystem(pointer), pointer, expected_checksum)

    def verify(self, checkpoint: CompletedCheckpoint) -> list[FileCheck]:
        """Does every file the checkpoint refers to exist with its recorded size?"""
        return verify_state_files(checkpoint, self.filesystem)

    def list_checkpoints(self, job_id: str, *, completed_only: bool = False) -> list[int]:
        """Ids of the job's ``chk-<id>`` directories, ascending; with ``completed_only``
        only those whose `_metadata` exists."""
        directory = self.job_directory(job_id)
        return [
            cid for cid, _ in self.checkpoint_dirs_under(directory, completed_only=completed_only)
        ]

    def checkpoint_dirs_under(
        self, directory: str, *, completed_only: bool = False
    ) -> list[tuple[int, Uri]]:
        """The ``chk-<id>`` directories directly under ``directory`` (a job's directory,
        here or anywhere), ascending by id; with ``completed_only`` only those whose
        `_metadata` exists (it is written last: one without is in progress or aborted)."""
        fs = self.filesystem(directory)
        try:
            entries = fs.list(directory)
        except FileNotFound:
            return []
        found = []
        for entry in entries:
            match = _CHECKPOINT_DIR.match(entry.name)
            if not (entry.is_dir and match):
                continue
            path = parse(entry.path)
            if not completed_only or fs.exists(str(path.child(METADATA_FILE_NAME))):
                found.append((int(match.group(1)), path))
        return sorted(found)

    def _checkpoint_dirs(self, job_id: str) -> list[tuple[int, Uri]]:
        return self.checkpoint_dirs_under(self.job_directory(job_id))

    # -- deleting -------------------------------------------------------------------

    def discard(self, pointer: CheckpointPointer) -> None:
        """Delete the checkpoint directory the pointer names: `_metadata` and the state
        files in it, which only this checkpoint owns (``shared/`` is left alone).
        Idempotent. Refuses savepoints and pointers outside this storage's layout."""
        if pointer.is_savepoint:
            raise StorageError(
                f"refusing to discard savepoint {pointer.checkpoint_id} of job "
                f"{pointer.job_id}: savepoints belong to their user",
                path=pointer.metadata_uri,
            )
        directory = parse(self.checkpoint_directory(pointer.job_id, pointer.checkpoint_id))
        metadata = parse(pointer.metadata_uri)
        if not (
            metadata.parent.same_filesystem(directory) and metadata.parent.path == directory.path
        ):
            raise PathOutsideRoot(
                f"refusing to discard checkpoint {pointer.checkpoint_id} of job "
                f"{pointer.job_id}: its metadata {pointer.metadata_uri} is not in {directory}",
                path=pointer.metadata_uri,
            )
        self._fs.delete(str(directory), recursive=True)

    def find_orphans(
        self,
        job_id: str,
        *,
        retained_ids: set[int],
        next_checkpoint_id: int,
        min_age_ms: int = 0,
        now_ms: int | None = None,
        keep_newest: bool = False,
    ) -> list[OrphanDirectory]:
        """Checkpoint directories no store pointer refers to (``retained_ids``) with an id
        below ``next_checkpoint_id``, untouched for at least ``min_age_ms``: left by a crash
        between state files and `_metadata`, by an aborted checkpoint, or by a discard that
        did not finish. Only ``chk-<n>`` directories are considered: never ``shared/``,
        never anything else a user put there, never a savepoint (those live elsewhere).

        ``next_checkpoint_id`` is the counter's next id, or the lowest id still in flight
        when a checkpoint is pending (its directory is not an orphan yet). The age is the
        newest modification time of the directory and the files in it, so a directory
        somebody still writes into stays young.

        ``keep_newest`` (while the job runs) also keeps, below ``next_checkpoint_id``, the
        newest directory and the newest one holding files: a driver may still be writing
        its snapshot into the first, and it reads its running state back from its latest
        snapshot, completed or not, until a newer snapshot replaces it.
        """
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        listed: list[tuple[int, Uri, FileStatus, list[FileStatus]]] = []
        for checkpoint_id, directory in self._checkpoint_dirs(job_id):
            if checkpoint_id >= next_checkpoint_id:
                continue
            try:
                status = self._fs.status(str(directory))
                entries = self._fs.list(str(directory))
            except FileNotFound:
                continue  # deleted meanwhile (a discard that was still running)
            listed.append((checkpoint_id, directory, status, entries))
        kept: set[int] = set()
        if keep_newest and listed:
            kept.add(listed[-1][0])
            with_files = [
                cid for cid, _, _, entries in listed if any(not e.is_dir for e in entries)
            ]
            kept.update(with_files[-1:])
        orphans = []
        for checkpoint_id, directory, status, entries in listed:
            if checkpoint_id in retained_ids or checkpoint_id in kept:
                continue
            modified = max(
                [status.modification_time_ms, *(e.modification_time_ms for e in entries)]
            )
            if now - modified < min_age_ms:
                continue
            size = sum(e.size for e in entries if not e.is_dir)
            orphans.append(OrphanDirectory(checkpoint_id, str(directory), size, modified))
        return orphans

    def delete_orphan(self, job_id: str, orphan: OrphanDirectory) -> bool:
        """Delete one directory :meth:`find_orphans` returned for ``job_id``. Refuses any
        path that is not this storage's ``chk-<id>`` directory of that job."""
        expected = self.checkpoint_directory(job_id, orphan.checkpoint_id)
        if parse(orphan.path).path != parse(expected).path:
            raise PathOutsideRoot(
                f"refusing to delete {orphan.path}: not checkpoint directory {expected}",
                path=orphan.path,
            )
        return self._fs.delete(expected, recursive=True)

    def collect_orphans(
        self,
        job_id: str,
        *,
        retained_ids: set[int],
        next_checkpoint_id: int,
        min_age_ms: int = 0,
        dry_run: bool = True,
    ) -> list[str]:
        """The paths :meth:`find_orphans` finds; deleted only when ``dry_run`` is False."""
        orphans = self.find_orphans(
            job_id,
            retained_ids=retained_ids,
            next_checkpoint_id=next_checkpoint_id,
            min_age_ms=min_age_ms,
        )
        if not dry_run:
            for orphan in orphans:
                self.delete_orphan(job_id, orphan)
        return [orphan.path for orphan in orphans]


@dataclass(frozen=True, slots=True)
class OrphanDirectory:
    """A ``chk-<id>`` directory no retained or pending checkpoint owns."""

    checkpoint_id: int
    path: str
    size_bytes: int
    modified_ms: int

    def to_dict(self) -> dict[str, object]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "path": self.path,
            "size_bytes": self.size_bytes,
            "modified_ms": self.modified_ms,
        }
