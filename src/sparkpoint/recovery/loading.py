"""Loading the checkpoint to restore: resolve a pointer, read and decode `_metadata`.

Pointers a person gives: a ``chk-<id>`` directory, a savepoint directory, a `_metadata`
file, or a job's checkpoint directory (``<checkpoint-dir>/<job-id>``: its newest
complete checkpoint). The service gives the job's completed-checkpoint store instead.

From a store or a job directory, the newest checkpoint is tried first; when its
`_metadata` is missing, damaged, or does not match what the store recorded, the next
older one is tried. Every skip is logged, and a restore that had to fall back counts once
in ``sparkpoint_restore_fallbacks_total{job_id}``. Which checkpoint was restored, and what
was skipped and why, is in the returned :class:`LoadedCheckpoint`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sparkpoint.checkpoint import (
    CheckpointPointer,
    CompletedCheckpoint,
    InvalidCheckpointValue,
)
from sparkpoint.metadata import MetadataError
from sparkpoint.metrics import RESTORE_FALLBACKS, RESTORES
from sparkpoint.recovery.errors import CheckpointLoadError, NoRestorableCheckpointError
from sparkpoint.storage import METADATA_FILE_NAME, CheckpointStorage, FileNotFound, StorageError
from sparkpoint.storage.uri import parse
from sparkpoint.store.api import CompletedCheckpointStore

log = logging.getLogger(__name__)

# What a damaged or missing checkpoint raises; anything else (a bug) propagates.
_UNREADABLE = (MetadataError, StorageError, InvalidCheckpointValue, CheckpointLoadError)


@dataclass(frozen=True, slots=True)
class SkippedCheckpoint:
    """A newer checkpoint that could not be restored, and why."""

    checkpoint_id: int
    metadata_uri: str
    reason: str


@dataclass(frozen=True, slots=True)
class LoadedCheckpoint:
    """The checkpoint to restore, where it was read from, and what was skipped first."""

    checkpoint: CompletedCheckpoint
    metadata_uri: str
    skipped: tuple[SkippedCheckpoint, ...] = ()

    @property
    def fell_back(self) -> bool:
        return bool(self.skipped)

    def describe(self) -> str:
        """One line for logs and the CLI, e.g. ``checkpoint 41 of job clicks (…/chk-41/
        _metadata), after skipping unreadable checkpoint 42``."""
        text = (
            f"{self.checkpoint.kind.value} {self.checkpoint.checkpoint_id} of job "
            f"{self.checkpoint.job_id} ({self.metadata_uri})"
        )
        if self.skipped:
            ids = ", ".join(str(s.checkpoint_id) for s in self.skipped)
            text += f", after skipping unreadable checkpoint(s) {ids}"
        return text


def load_checkpoint(storage: CheckpointStorage, pointer: str) -> LoadedCheckpoint:
    """Load the checkpoint or savepoint at ``pointer`` (see the module docstring).

    Raises :class:`CheckpointLoadError` naming the path and what is wrong.

    >>> load_checkpoint(CheckpointStorage("/ckpt"), "/ckpt/clicks/chk-42")  # doctest: +SKIP
    LoadedCheckpoint(checkpoint=CompletedCheckpoint(job_id='clicks', checkpoint_id=42, ...
    """
    try:
        metadata_uri = storage.resolve_metadata_uri(pointer)
        return LoadedCheckpoint(storage.read_metadata(metadata_uri), metadata_uri)
    except FileNotFound as exc:
        candidates = _checkpoint_dirs(storage, pointer)
        if not candidates:
            raise CheckpointLoadError(f"cannot load {pointer}: {exc}") from exc
    except _UNREADABLE as exc:
        raise CheckpointLoadError(f"cannot load {pointer}: {exc}") from exc
    return _first_readable(
        storage,
        [(cid, str(parse(d).child(METADATA_FILE_NAME)), "") for cid, d in candidates],
        job=parse(pointer).name,
        where=pointer,
    )


def _checkpoint_dirs(storage: CheckpointStorage, pointer: str) -> list[tuple[int, str]]:
    """Complete ``chk-<id>`` directories directly under ``pointer``, newest first (a job
    directory). One without `_metadata` is in progress or aborted, never a completed
    checkpoint, so it is not a candidate at all."""
    try:
        found = storage.checkpoint_dirs_under(pointer, completed_only=True)
    except StorageError:
        return []
    return [(cid, str(directory)) for cid, directory in reversed(found)]


def load_latest_checkpoint(
    store: CompletedCheckpointStore, storage: CheckpointStorage, job_id: str
) -> LoadedCheckpoint | None:
    """The newest readable retained checkpoint of ``job_id``, or ``None`` when the store
    holds none (a first start). Answers from what the store last recovered.

    Raises :class:`NoRestorableCheckpointError` when checkpoints are retained but not one
    can be read — restoring from nothing then would silently lose state.
    """
    pointers: Sequence[CheckpointPointer] = store.get_all()
    if not pointers:
        return None
    candidates = [
        (p.checkpoint_id, p.metadata_uri, p.metadata_checksum) for p in reversed(pointers)
    ]
    return _first_readable(storage, candidates, job=job_id, where=f"the store of job {job_id}")


def _first_readable(
    storage: CheckpointStorage,
    candidates: Sequence[tuple[int, str, str]],
    *,
    job: str,
    where: str,
) -> LoadedCheckpoint:
    skipped: list[SkippedCheckpoint] = []
    for checkpoint_id, metadata_uri, checksum in candidates:
        try:
            checkpoint = storage.read_metadata(metadata_uri, checksum)
            if checkpoint.checkpoint_id != checkpoint_id:
                raise CheckpointLoadError(
                    f"{metadata_uri}: holds checkpoint {checkpoint.checkpoint_id}, "
                    f"not {checkpoint_id}"
                )
        except _UNREADABLE as exc:
            log.warning(
                "checkpoint %d of %s cannot be restored, trying an older one: %s",
                checkpoint_id,
                where,
                exc,
            )
            skipped.append(SkippedCheckpoint(checkpoint_id, metadata_uri, str(exc)))
            continue
        loaded = LoadedCheckpoint(checkpoint, metadata_uri, tuple(skipped))
        RESTORES.labels(job_id=checkpoint.job_id).inc()
        if skipped:
            RESTORE_FALLBACKS.labels(job_id=checkpoint.job_id).inc()
            log.warning("restoring %s", loaded.describe())
        else:
            log.info("restoring %s", loaded.describe())
        return loaded
    reasons = "\n".join(f"  checkpoint {s.checkpoint_id}: {s.reason}" for s in skipped)
    raise NoRestorableCheckpointError(
        f"no checkpoint of {where} can be restored ({len(skipped)} tried):\n{reasons}"
    )
