"""The part of checkpoint storage the coordinator uses, as a Protocol.

``sparkpoint.storage.CheckpointStorage`` provides exactly these methods; the coordinator
depends on this seam only, so it can be driven by any storage with the same contract.
"""

from __future__ import annotations

from typing import Protocol

from sparkpoint.checkpoint import CheckpointPointer, CompletedCheckpoint
from sparkpoint.storage import StorageError

#: Exceptions that mean "storage could not do it": the checkpoint fails with the reason and
#: the coordinator goes on. Anything else is a bug and propagates. OSError is included for
#: storages that let the local filesystem's errors through untranslated.
STORAGE_FAILURES: tuple[type[Exception], ...] = (StorageError, OSError)


class CommittedMetadataLike(Protocol):
    """Where a committed ``_metadata`` is, its size in bytes and its checksum."""

    @property
    def uri(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def checksum(self) -> str: ...


class CheckpointLocationLike(Protocol):
    """The directory of one checkpoint or savepoint."""

    @property
    def directory(self) -> str:
        """Where the pipeline writes the state files of this checkpoint."""
        ...

    @property
    def metadata_uri(self) -> str: ...

    def commit_metadata(self, checkpoint: CompletedCheckpoint) -> CommittedMetadataLike:
        """Write ``_metadata`` to a temporary name and rename it into place; never
        overwrite an existing one."""
        ...

    def discard(self) -> None:
        """Delete the directory and everything in it."""
        ...


class CheckpointStorageLike(Protocol):
    """Creates checkpoint and savepoint locations and deletes completed checkpoints."""

    def init_checkpoint(self, job_id: str, checkpoint_id: int) -> CheckpointLocationLike: ...

    def init_savepoint(
        self, job_id: str, target_dir: str | None = None
    ) -> CheckpointLocationLike: ...

    def discard(self, pointer: CheckpointPointer) -> None: ...
