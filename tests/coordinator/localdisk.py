"""A tiny local-disk checkpoint storage with the coordinator's storage contract.

Stands in for ``sparkpoint.storage.CheckpointStorage`` in these tests: real directories,
`_metadata` written to a temporary name and renamed into place, never overwritten. Its
`_metadata` is a JSON summary (the real binary codec belongs to storage).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from sparkpoint.checkpoint import CheckpointPointer, CompletedCheckpoint


@dataclass(frozen=True)
class Committed:
    uri: str
    size: int
    checksum: str


def metadata_summary(checkpoint: CompletedCheckpoint) -> dict[str, object]:
    return {
        "job_id": checkpoint.job_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "kind": checkpoint.kind.value,
        "trigger_timestamp_ms": checkpoint.trigger_timestamp_ms,
        "completion_timestamp_ms": checkpoint.completion_timestamp_ms,
        "operators": {
            uid: {str(i): s.state_size for i, s in sorted(state.subtask_states.items())}
            for uid, state in checkpoint.operator_states.items()
        },
    }


class LocalLocation:
    def __init__(self, directory: Path) -> None:
        self._dir = directory

    @property
    def directory(self) -> str:
        return str(self._dir)

    @property
    def metadata_uri(self) -> str:
        return (self._dir / "_metadata").as_uri()

    def commit_metadata(self, checkpoint: CompletedCheckpoint) -> Committed:
        data = json.dumps(metadata_summary(checkpoint), sort_keys=True).encode()
        final = self._dir / "_metadata"
        if final.exists():
            raise FileExistsError(f"{final} exists; _metadata is never overwritten")
        temp = self._dir / f"._metadata.{secrets.token_hex(4)}.tmp"
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        # link + unlink refuses to replace an existing file, unlike rename.
        os.link(temp, final)
        temp.unlink()
        return Committed(self.metadata_uri, len(data), hashlib.sha256(data).hexdigest())

    def discard(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class LocalCheckpointStorage:
    def __init__(self, checkpoint_dir: Path, *, savepoint_dir: Path | None = None) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.savepoint_dir = savepoint_dir
        self.discarded: list[int] = []

    def init_checkpoint(self, job_id: str, checkpoint_id: int) -> LocalLocation:
        directory = self.checkpoint_dir / job_id / f"chk-{checkpoint_id}"
        directory.mkdir(parents=True)
        return LocalLocation(directory)

    def init_savepoint(self, job_id: str, target_dir: str | None = None) -> LocalLocation:
        base = Path(target_dir) if target_dir is not None else self.savepoint_dir
        if base is None:
            raise NotADirectoryError("no savepoint directory configured and none given")
        directory = base / f"savepoint-{job_id[:6]}-{secrets.token_hex(6)}"
        directory.mkdir(parents=True)
        return LocalLocation(directory)

    def discard(self, pointer: CheckpointPointer) -> None:
        self.discarded.append(pointer.checkpoint_id)
        shutil.rmtree(metadata_path(pointer).parent, ignore_errors=True)


def metadata_path(pointer: CheckpointPointer) -> Path:
    return Path(urlparse(pointer.metadata_uri).path)


def read_metadata(pointer: CheckpointPointer) -> dict[str, object]:
    return json.loads(metadata_path(pointer).read_bytes())
