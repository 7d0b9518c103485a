"""The filesystem seam: what checkpoint storage needs from a filesystem, nothing more.

Two implementations: :class:`~sparkpoint.storage.local.LocalFileSystem` and
:class:`~sparkpoint.storage.webhdfs.WebHdfsFileSystem`. Both are picklable configuration
(a Spark executor gets a copy and connects on first use) and run the same contract tests.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import BinaryIO, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class FileStatus:
    """A file or directory. ``path`` is spelled like the URI it was listed under."""

    path: str
    is_dir: bool
    size: int
    modification_time_ms: int

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@runtime_checkable
class OutputFile(Protocol):
    """A file being written. ``close`` makes it complete and visible under its name (and
    fails with FileAlreadyExists if something else took the name); ``abort`` gives it up
    and removes what was written, as far as it can."""

    def write(self, data: bytes) -> int: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


@runtime_checkable
class FileSystem(Protocol):
    """Guarantees each implementation gives (the contract tests check them):

    - ``create`` never replaces an existing file: ``close`` of the returned file raises
      FileAlreadyExists (the local one refuses already when opening). Parents are created.
    - ``write_atomic`` writes a temporary file next to the target and renames it into
      place: readers see the whole file or nothing, an existing target is never replaced,
      and a failed write leaves no target. On the local disk the file and its directory
      are fsynced before it returns.
    - ``rename`` never replaces its target.
    - ``read_range`` returns up to ``length`` bytes from ``offset`` (fewer only at the end
      of the file); ``open_read`` streams a whole file.
    - ``delete`` answers False when there was nothing to delete.
    - ``list`` gives the entries of a directory sorted by name.
    """

    def status(self, path: str) -> FileStatus: ...

    def exists(self, path: str) -> bool: ...

    def list(self, path: str) -> list[FileStatus]: ...

    def mkdirs(self, path: str) -> None: ...

    def read(self, path: str) -> bytes: ...

    def read_range(self, path: str, offset: int, length: int) -> bytes: ...

    def open_read(self, path: str) -> AbstractContextManager[BinaryIO]: ...

    def create(self, path: str) -> OutputFile: ...

    def create_exclusive(self, path: str, data: bytes) -> None: ...

    def write_atomic(self, path: str, data: bytes) -> None: ...

    def rename(self, source: str, target: str) -> None: ...

    def delete(self, path: str, *, recursive: bool = False) -> bool: ...


def check_range(path: str, offset: int, length: int) -> None:
    if offset < 0 or length < 0:
        raise ValueError(f"read of {path}: negative offset {offset} or length {length}")
