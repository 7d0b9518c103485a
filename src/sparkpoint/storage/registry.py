"""``filesystem_for``: the filesystem that serves a URI."""

from __future__ import annotations

from typing import Any

from sparkpoint.storage.errors import StorageError
from sparkpoint.storage.filesystem import FileSystem
from sparkpoint.storage.local import LocalFileSystem
from sparkpoint.storage.uri import LOCAL_SCHEMES, parse

#: Options of the HDFS filesystem (see sparkpoint.storage.webhdfs.WebHdfsFileSystem).
HDFS_OPTIONS = frozenset({"user", "timeout", "retry_s", "webhdfs_port", "auth"})


def filesystem_for(uri: str, **options: Any) -> FileSystem:
    """The filesystem of ``uri``: local for plain paths and ``file://``, WebHDFS for
    ``hdfs://``, ``webhdfs://`` and ``swebhdfs://``.

    ``options`` (``user``, ``timeout``, ``retry_s``, ``webhdfs_port``, ``auth``) configure HDFS; the
    local filesystem needs none and ignores them, so one set of options serves both.

    >>> filesystem_for("/tmp/checkpoints")
    LocalFileSystem()
    """
    unknown = set(options) - HDFS_OPTIONS
    if unknown:
        raise StorageError(
            f"unknown filesystem option(s) {sorted(unknown)}; known: {sorted(HDFS_OPTIONS)}"
        )
    parsed = parse(uri)
    if parsed.scheme in LOCAL_SCHEMES:
        return LocalFileSystem()
    # Imported here: the local filesystem (the embedded default, most executors' case)
    # should not pay for importing the HTTP stack.
    from sparkpoint.storage.webhdfs import WebHdfsFileSystem

    return WebHdfsFileSystem(parsed.scheme, parsed.authority, **options)
