"""Checking that the files a checkpoint refers to exist with their recorded sizes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparkpoint.checkpoint import CompletedCheckpoint, FileStateHandle
from sparkpoint.storage.errors import FileNotFound, StorageError
from sparkpoint.storage.filesystem import FileSystem


@dataclass(frozen=True, slots=True)
class FileCheck:
    """One referenced file: ``problem`` is None when it is as recorded."""

    operator_uid: str
    subtask: int
    path: str
    expected_size: int
    actual_size: int | None
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_dict(self) -> dict[str, object]:
        """As the CLI's and the API's verification reports list a problem."""
        return {
            "operator": self.operator_uid,
            "subtask": self.subtask,
            "path": self.path,
            "expected_size": self.expected_size,
            "actual_size": self.actual_size,
            "problem": self.problem,
        }


def _referenced_files(checkpoint: CompletedCheckpoint) -> list[tuple[str, int, FileStateHandle]]:
    found = []
    for uid, state in checkpoint.operator_states.items():
        for index, subtask in sorted(state.subtask_states.items()):
            for keyed in subtask.keyed:
                found += [(uid, index, s) for s in keyed.streams if isinstance(s, FileStateHandle)]
            for handle in subtask.operator:
                if isinstance(handle.stream, FileStateHandle):
                    found.append((uid, index, handle.stream))
    return found


def verify_state_files(
    checkpoint: CompletedCheckpoint, filesystem_for: Callable[[str], FileSystem]
) -> list[FileCheck]:
    """One check per file handle, in operator and subtask order (a file shared by several
    handles is checked once per handle)."""
    checks = []
    statuses: dict[str, int | str] = {}
    for uid, index, stream in _referenced_files(checkpoint):
        if stream.path not in statuses:
            try:
                status = filesystem_for(stream.path).status(stream.path)
                statuses[stream.path] = status.size if not status.is_dir else "is a directory"
            except FileNotFound:
                statuses[stream.path] = "missing"
            except StorageError as exc:
                statuses[stream.path] = f"unreadable: {exc}"
        seen = statuses[stream.path]
        if isinstance(seen, str):
            checks.append(FileCheck(uid, index, stream.path, stream.size, None, seen))
        elif seen != stream.size:
            problem = f"size {seen}, recorded {stream.size}"
            checks.append(FileCheck(uid, index, stream.path, stream.size, seen, problem))
        else:
            checks.append(FileCheck(uid, index, stream.path, stream.size, seen, None))
    return checks
