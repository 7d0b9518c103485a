"""The local filesystem: plain paths and ``file://`` URIs.

Durability: a committed file is fsynced, and so is its directory (a new name is only
durable once its directory is). OSErrors become storage errors in :func:`_translated`.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from sparkpoint.storage.errors import (
    FileAlreadyExists,
    FileNotFound,
    PermissionDenied,
    StorageError,
)
from sparkpoint.storage.filesystem import FileStatus, check_range
from sparkpoint.storage.uri import LOCAL_SCHEMES, Uri, parse


@contextmanager
def _translated(path: str) -> Iterator[None]:
    try:
        yield
    except FileNotFoundError as exc:
        raise FileNotFound(f"no such file or directory: {path}", path=path) from exc
    except FileExistsError as exc:
        raise FileAlreadyExists(f"already exists: {path}", path=path) from exc
    except NotADirectoryError as exc:
        raise FileNotFound(f"not a directory on the way to {path}", path=path) from exc
    except PermissionError as exc:
        raise PermissionDenied(f"{path}: permission denied", path=path) from exc
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise StorageError(f"{path}: {reason}", path=path) from exc


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _LocalOutputFile:
    """Written in place under its final name (opened exclusively), fsynced on close."""

    def __init__(self, local: Path, display: str) -> None:
        self._local = local
        self._display = display
        with _translated(display):
            local.parent.mkdir(parents=True, exist_ok=True)
            self._file: BinaryIO | None = local.open("xb")

    def write(self, data: bytes) -> int:
        if self._file is None:
            raise StorageError(f"write to closed file {self._display}", path=self._display)
        with _translated(self._display):
            return self._file.write(data)

    def close(self) -> None:
        if self._file is None:
            return
        with _translated(self._display):
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        self._file = None

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        with suppress(FileNotFoundError):
            self._local.unlink()


class LocalFileSystem:
    """The local disk. Stateless: one instance serves every local path."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalFileSystem)

    def __hash__(self) -> int:
        return hash(LocalFileSystem)

    def __repr__(self) -> str:
        return "LocalFileSystem()"

    @staticmethod
    def _local(path: str) -> tuple[Uri, Path]:
        uri = parse(path)
        if uri.scheme not in LOCAL_SCHEMES:
            raise StorageError(f"{path} is not a local path", path=path)
        return uri, Path(uri.path)

    def status(self, path: str) -> FileStatus:
        uri, local = self._local(path)
        with _translated(path):
            return _status(str(uri), local.stat())

    def exists(self, path: str) -> bool:
        return self._local(path)[1].exists()

    def list(self, path: str) -> list[FileStatus]:
        uri, local = self._local(path)
        with _translated(path):
            if not stat.S_ISDIR(local.stat().st_mode):
                raise StorageError(f"not a directory: {path}", path=path)
            entries = []
            for child in sorted(local.iterdir()):
                try:
                    st = child.stat()
                except FileNotFoundError:
                    continue  # deleted while listing
                entries.append(_status(str(uri.child(child.name)), st))
        return entries

    def mkdirs(self, path: str) -> None:
        _, local = self._local(path)
        with _translated(path):
            missing = []
            current = local
            while not current.is_dir():
                missing.append(current)
                current = current.parent
            local.mkdir(parents=True, exist_ok=True)
            # A new directory is durable once its parent is synced.
            for created in reversed(missing):
                _fsync_directory(created.parent)

    def read(self, path: str) -> bytes:
        _, local = self._local(path)
        with _translated(path):
            return local.read_bytes()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        check_range(path, offset, length)
        _, local = self._local(path)
        with _translated(path), local.open("rb") as f:
            f.seek(offset)
            return f.read(length)

    def open_read(self, path: str) -> AbstractContextManager[BinaryIO]:
        _, local = self._local(path)
        with _translated(path):
            return local.open("rb")

    def create(self, path: str) -> _LocalOutputFile:
        _, local = self._local(path)
        return _LocalOutputFile(local, path)

    def create_exclusive(self, path: str, data: bytes) -> None:
        out = self.create(path)
        try:
            out.write(data)
            out.close()
        except BaseException:
            out.abort()
            raise

    def write_atomic(self, path: str, data: bytes) -> None:
        uri, local = self._local(path)
        temp = local.with_name(f".{uri.name}.{uuid.uuid4().hex}.inprogress")
        with _translated(path):
            try:
                with temp.open("xb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                # link() refuses an existing target where rename() would replace it.
                os.link(temp, local)
            finally:
                with suppress(FileNotFoundError):
                    temp.unlink()
            _fsync_directory(local.parent)

    def rename(self, source: str, target: str) -> None:
        _, src = self._local(source)
        _, dst = self._local(target)
        with _translated(source):
            is_file = not stat.S_ISDIR(src.stat().st_mode)
        with _translated(target):
            if is_file:
                os.link(src, dst)  # refuses an existing target
            elif dst.exists():
                raise FileExistsError(errno.EEXIST, "exists", str(dst))
            else:
                src.rename(dst)
        with _translated(source):
            if is_file:
                src.unlink()
            _fsync_directory(dst.parent)

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        _, local = self._local(path)
        with _translated(path):
            if not local.exists() and not local.is_symlink():
                return False
            if local.is_dir() and not local.is_symlink():
                if recursive:
                    shutil.rmtree(local)
                else:
                    local.rmdir()
            else:
                local.unlink()
            return True


def _status(path: str, st: os.stat_result) -> FileStatus:
    is_dir = stat.S_ISDIR(st.st_mode)
    return FileStatus(path, is_dir, 0 if is_dir else st.st_size, st.st_mtime_ns // 1_000_000)
