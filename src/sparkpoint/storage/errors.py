"""Storage errors. Every message names the path it is about.

Backend exceptions (OSError, WebHDFS ``RemoteException``s, HTTP failures) become these in
one place per backend: :mod:`sparkpoint.storage.local` and :mod:`sparkpoint.storage.webhdfs`.
"""

from __future__ import annotations


class StorageError(Exception):
    """A storage operation failed; ``path`` is the file or directory it was about."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), str(self), self.path))


def _rebuild(cls: type[StorageError], message: str, path: str | None) -> StorageError:
    return cls(message, path=path)


class FileNotFound(StorageError):
    """The file or directory does not exist."""


class FileAlreadyExists(StorageError):
    """The target of an exclusive create or a rename exists already; nothing was replaced."""


class PathOutsideRoot(StorageError):
    """A path with a '..' segment, or one outside the directories this storage owns."""


class StorageUnavailable(StorageError):
    """The filesystem could not be reached (connection refused, timeout); the operation
    may or may not have been applied."""


class PermissionDenied(StorageError):
    """The filesystem's user may not do this here (HDFS permissions, a read-only disk)."""
