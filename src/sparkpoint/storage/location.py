"""Where one checkpoint or savepoint is written: its state files and its `_metadata`."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    InvalidCheckpointValue,
    validate_operator_uid,
)
from sparkpoint.metadata import encode_metadata, metadata_checksum
from sparkpoint.storage.errors import PathOutsideRoot, StorageError
from sparkpoint.storage.filesystem import FileSystem
from sparkpoint.storage.streams import StateOutputStream
from sparkpoint.storage.uri import parse

METADATA_FILE_NAME = "_metadata"
#: Under a job's checkpoint directory: files referenced by several checkpoints.
SHARED_DIR = "shared"


@dataclass(frozen=True, slots=True)
class CommittedMetadata:
    """A `_metadata` in place: its URI, size and checksum (``sha256:…``) for the store."""

    uri: str
    size: int
    checksum: str


def state_file_name(operator_uid: str, subtask: int, attempt: int) -> str:
    """``<operator-uid>-<subtask>-<attempt>``: unique per attempt, so a retried task never
    collides with (or reads) the file of an earlier attempt."""
    try:
        validate_operator_uid(operator_uid)
    except InvalidCheckpointValue as exc:
        raise PathOutsideRoot(
            f"operator uid {operator_uid!r} cannot name a state file: {exc}", path=operator_uid
        ) from None
    if subtask < 0 or attempt < 0:
        raise StorageError(f"negative subtask {subtask} or attempt {attempt}")
    return f"{operator_uid}-{subtask}-{attempt}"


@dataclass(frozen=True, slots=True)
class CheckpointLocation:
    """The directory of one checkpoint (``chk-<id>``) or savepoint. Plain picklable data:
    a copy can be sent to Spark executors, which open state streams from it."""

    fs: FileSystem
    directory: str
    job_id: str
    checkpoint_id: int | None
    is_savepoint: bool
    inline_threshold: int

    @property
    def metadata_uri(self) -> str:
        return str(parse(self.directory).child(METADATA_FILE_NAME))

    def state_output(self, operator_uid: str, subtask: int, attempt: int) -> StateOutputStream:
        name = state_file_name(operator_uid, subtask, attempt)
        path = str(parse(self.directory).child(name))
        return StateOutputStream(self.fs, path, name, self.inline_threshold)

    def store_file_output(
        self, operator_uid: str, subtask: int, attempt: int, file_name: str
    ) -> StateOutputStream:
        """One of a subtask's own store files (manifest, options) in this checkpoint:
        ``<uid>-<subtask>-<attempt>-<file name>``, inline when small."""
        name = f"{state_file_name(operator_uid, subtask, attempt)}-{file_name}"
        path = str(parse(self.directory).child(name))
        return StateOutputStream(self.fs, path, name, self.inline_threshold)

    @property
    def shared_directory(self) -> str:
        """``<checkpoint-dir>/<job>/shared``: files several checkpoints reference."""
        return str(parse(self.directory).parent.child(SHARED_DIR))

    def shared_output(self, name: str) -> StateOutputStream:
        """A new file under ``shared/`` (always a file, created exclusively: shared names
        are never reused)."""
        path = str(parse(self.shared_directory).child(name))
        return StateOutputStream(self.fs, path, name, 0)

    def commit_metadata(self, checkpoint: CompletedCheckpoint) -> CommittedMetadata:
        """Encode, write under a temporary name, rename to `_metadata`. Refuses a
        checkpoint of another job, id or kind, and an existing `_metadata`
        (FileAlreadyExists); a failed write leaves no `_metadata` behind."""
        self._check_belongs(checkpoint)
        # Savepoints refer to their files relatively, so the directory can be moved.
        data = encode_metadata(
            checkpoint, relative_to=self.directory if self.is_savepoint else None
        )
        self.fs.write_atomic(self.metadata_uri, data)
        return CommittedMetadata(self.metadata_uri, len(data), metadata_checksum(data))

    def discard(self) -> None:
        """Delete the directory and everything in it (an aborted checkpoint)."""
        self.fs.delete(self.directory, recursive=True)

    def _check_belongs(self, checkpoint: CompletedCheckpoint) -> None:
        kind = CheckpointKind.SAVEPOINT if self.is_savepoint else CheckpointKind.CHECKPOINT
        problems = []
        if checkpoint.job_id != self.job_id:
            problems.append(f"job {checkpoint.job_id!r} is not {self.job_id!r}")
        if checkpoint.kind is not kind:
            problems.append(f"a {checkpoint.kind.value} cannot go into a {kind.value} location")
        if self.checkpoint_id is not None and checkpoint.checkpoint_id != self.checkpoint_id:
            problems.append(f"checkpoint {checkpoint.checkpoint_id} is not {self.checkpoint_id}")
        if problems:
            raise StorageError(
                f"refusing to commit into {self.directory}: " + "; ".join(problems),
                path=self.directory,
            )
