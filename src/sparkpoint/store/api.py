"""The CompletedCheckpointStore seam and the discard hook storage implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sparkpoint.checkpoint import CheckpointPointer, JobStatus
from sparkpoint.config import StoreSettings

#: The default of state.checkpoints.num-retained (Flink's), from the configuration.
DEFAULT_MAX_RETAINED = StoreSettings().max_retained


class CheckpointStoreError(Exception):
    """A request the store refuses; nothing was changed."""


class DuplicateCheckpointError(CheckpointStoreError):
    """A checkpoint with this id is already in the store."""


class CheckpointOrderError(CheckpointStoreError):
    """The id to add is not above the latest one in the store."""


@runtime_checkable
class CheckpointDiscarder(Protocol):
    """Deletes the files a checkpoint owns. Storage implements it; the coordinator may wrap
    it to run in the background. Never called for savepoints."""

    def discard(self, pointer: CheckpointPointer) -> None: ...


@runtime_checkable
class CompletedCheckpointStore(Protocol):
    """The retained completed checkpoints of one job, newest last.

    ``add_checkpoint_and_subsume_oldest`` adds a checkpoint and, in the same atomic step,
    drops the oldest ones beyond ``max_retained``; it returns the dropped pointers (after
    passing each checkpoint, not savepoint, to ``discarder`` if one is given).
    ``recover`` (re)reads the store's durable content; ``get_latest``/``get_all`` answer
    from what was last recovered or added. ``shutdown`` removes everything, discarding the
    files, only when the job is globally terminal.
    """

    @property
    def max_retained(self) -> int: ...

    def recover(self) -> list[CheckpointPointer]: ...

    def add_checkpoint_and_subsume_oldest(
        self, pointer: CheckpointPointer, discarder: CheckpointDiscarder | None = None
    ) -> list[CheckpointPointer]: ...

    def get_latest(self) -> CheckpointPointer | None: ...

    def get_all(self) -> list[CheckpointPointer]: ...

    def shutdown(
        self, job_status: JobStatus, discarder: CheckpointDiscarder | None = None
    ) -> None: ...
