"""A transactional (two-phase) file sink: committed files appear whole and exactly once.

Phase one, on the executors: each epoch's task of partition ``i`` writes its outputs to
``<dir>/_inprogress/<run>-<epoch>-<i>.jsonl`` atomically. The name is fixed by (run,
epoch, partition) and the content by the deterministic epoch, so a retried or recomputed
task finds the file already there and leaves it.

Phase two, on the driver: at a checkpoint the files written since the previous one are
*pre-committed* as transaction N and recorded in the sink's operator state. When the
coordinator reports N complete, every pending transaction ≤ N is committed by renaming
its files to ``<dir>/part-<epoch>-<i>-<run>.jsonl`` (a rename that finds its target
already there was done before: idempotent). A transaction whose checkpoint aborted stays
pending and commits with the next completed one. On restore from checkpoint N, the
transactions in N's state are committed and every other in-progress file — written after
N, to be replayed — is deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.pipeline.state import pickles
from sparkpoint.storage import FileAlreadyExists, FileNotFound, filesystem_for
from sparkpoint.storage.uri import parse

IN_PROGRESS_DIR = "_inprogress"
_IN_PROGRESS_NAME = re.compile(r"^[0-9a-f]+-[0-9]{8}-[0-9]{5}\.jsonl$")


class SinkCommitError(RuntimeError):
    """A pre-committed file is neither in progress nor committed: it was lost."""


def to_json_line(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class PendingFile:
    """One pre-committed file: its transaction, where it is and where it goes."""

    transaction: int
    partition: int
    in_progress: str
    final: str


@dataclass(frozen=True, slots=True)
class SinkWriter:
    """The executor side for one epoch (picklable)."""

    directory: str
    #: The driver process's random tag: files of two processes never collide.
    process_tag: str
    epoch: int
    serialize: Callable[[Any], str] = to_json_line

    def write(self, partition: int, outputs: Iterable[Any]) -> PendingFile | None:
        lines = [self.serialize(v) for v in outputs]
        if not lines:
            return None
        base = parse(self.directory)
        stem = f"{self.epoch:08d}-{partition:05d}"
        in_progress = str(base.child(IN_PROGRESS_DIR).child(f"{self.process_tag}-{stem}.jsonl"))
        final = str(base.child(f"part-{stem}-{self.process_tag}.jsonl"))
        fs = filesystem_for(in_progress)
        if not fs.exists(in_progress):
            # A concurrent attempt of the same task may have written the same bytes.
            with suppress(FileAlreadyExists):
                fs.write_atomic(in_progress, ("\n".join(lines) + "\n").encode())
        return PendingFile(0, partition, in_progress, final)


@dataclass
class TransactionalFileSink:
    """Driver side. ``serialize`` turns one output into one line (JSON by default)."""

    directory: str
    serialize: Callable[[Any], str] = to_json_line
    _open: list[PendingFile] = field(default_factory=list)
    _pending: dict[int, list[PendingFile]] = field(default_factory=dict)
    committed_files: int = 0

    def __post_init__(self) -> None:
        self._fs = filesystem_for(self.directory)
        self._fs.mkdirs(str(parse(self.directory).child(IN_PROGRESS_DIR)))

    def bind(self, job_id: str, operator_uid: str) -> None:
        """File names carry the run id, not the job: nothing to bind."""

    def writer(self, process_tag: str, epoch: int) -> SinkWriter:
        return SinkWriter(self.directory, process_tag, epoch, self.serialize)

    def epoch_written(self, files: Iterable[PendingFile]) -> None:
        self._open.extend(files)

    def pre_commit(self, checkpoint_id: int) -> None:
        """Close the running transaction as transaction ``checkpoint_id``."""
        if self._open:
            self._pending[checkpoint_id] = [
                PendingFile(checkpoint_id, f.partition, f.in_progress, f.final) for f in self._open
            ]
            self._open = []

    def snapshot(self, parallelism: int) -> list[list[bytes]]:
        """SPLIT_DISTRIBUTE elements per sink subtask: every pending file, by partition."""
        out: list[list[bytes]] = [[] for _ in range(parallelism)]
        for files in self._pending.values():
            for f in files:
                out[f.partition % parallelism].append(pickles.dumps(f))
        return out

    def commit_up_to(self, checkpoint_id: int) -> int:
        """Commit every pending transaction ≤ ``checkpoint_id``; returns files committed."""
        done = 0
        for txn in sorted(t for t in self._pending if t <= checkpoint_id):
            for f in self._pending.pop(txn):
                self._commit(f)
                done += 1
        self.committed_files += done
        return done

    def _commit(self, f: PendingFile) -> None:
        if self._fs.exists(f.final):
            # Renamed before (a commit that was repeated after a restart).
            self._fs.delete(f.in_progress)
            return
        try:
            self._fs.rename(f.in_progress, f.final)
        except FileNotFound as exc:
            raise SinkCommitError(f"pre-committed file {f.in_progress} is gone") from exc
        except FileAlreadyExists:
            self._fs.delete(f.in_progress)

    def restore(self, elements: Iterable[bytes]) -> None:
        """Commit the transactions of the restored checkpoint; drop all later output."""
        restored: list[PendingFile] = [pickles.loads(e) for e in elements]
        keep = {parse(f.in_progress).name for f in restored}
        for f in restored:
            self._commit(f)
        self.committed_files += len(restored)
        base = parse(self.directory).child(IN_PROGRESS_DIR)
        for entry in self._fs.list(str(base)):
            if _IN_PROGRESS_NAME.match(entry.name) and entry.name not in keep:
                self._fs.delete(entry.path)
        self._open, self._pending = [], {}

    def close(self) -> None:
        """No client to release: files are written and renamed through the storage."""

    def committed_lines(self) -> list[str]:
        """Every line of every committed file (for checks and the demo)."""
        lines: list[str] = []
        for entry in self._fs.list(self.directory):
            if entry.is_dir or not entry.name.startswith("part-"):
                continue
            lines.extend(self._fs.read(entry.path).decode().splitlines())
        return lines
