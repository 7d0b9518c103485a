"""The stream a task writes one state snapshot into: inline when small, a file otherwise."""

from __future__ import annotations

from types import TracebackType

from sparkpoint.checkpoint import FileStateHandle, InlineStateHandle
from sparkpoint.storage.errors import StorageError
from sparkpoint.storage.filesystem import FileSystem, OutputFile


class StateOutputStream:
    """Collects bytes in memory until they reach ``inline_threshold``, then streams them to
    ``path`` (created exclusively, so two attempts never share a file).

    >>> from sparkpoint.storage.local import LocalFileSystem
    >>> out = StateOutputStream(LocalFileSystem(), "/nowhere/op-0-0", "op-0-0", 1024)
    >>> out.write(b"small state")
    11
    >>> out.close_and_get_handle()
    InlineStateHandle(name='op-0-0', data=b'small state')
    """

    def __init__(self, fs: FileSystem, path: str, name: str, inline_threshold: int) -> None:
        self._fs = fs
        self._path = path
        self._name = name
        self._threshold = inline_threshold
        self._buffer: bytearray | None = bytearray()
        self._file: OutputFile | None = None
        self._position = 0
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    def write(self, data: bytes) -> int:
        if self._closed:
            raise StorageError(f"write to closed state stream {self._path}", path=self._path)
        if self._file is None and self._position + len(data) >= self._threshold:
            self._file = self._fs.create(self._path)
            if self._buffer:
                self._file.write(bytes(self._buffer))
            self._buffer = None
        if self._file is not None:
            self._file.write(data)
        else:
            assert self._buffer is not None
            self._buffer += data
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def close_and_get_handle(self) -> FileStateHandle | InlineStateHandle:
        """Finish the snapshot. Below the threshold nothing touches the filesystem."""
        if self._closed:
            raise StorageError(f"state stream {self._path} closed twice", path=self._path)
        self._closed = True
        if self._file is None and self._position < self._threshold:
            return InlineStateHandle(self._name, bytes(self._buffer or b""))
        if self._file is None:  # an empty snapshot with inlining switched off
            self._file = self._fs.create(self._path)
        try:
            self._file.close()
        except BaseException:
            self._file.abort()
            raise
        return FileStateHandle(self._path, self._position)

    def abort(self) -> None:
        """Give up: removes what was written (best effort)."""
        self._closed = True
        self._buffer = None
        if self._file is not None:
            self._file.abort()

    def __enter__(self) -> StateOutputStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is not None and not self._closed:
            self.abort()
