"""HDFS through its WebHDFS REST API, with the ``hdfs`` package as the client.

``hdfs://namenode:8020/path`` is reached at the namenode's HTTP address (port
``webhdfs_port``, default 9870); ``webhdfs://host:port/path`` names the HTTP address
itself and ``swebhdfs://`` the same over HTTPS. Authentication is Hadoop's "simple" one
(``user.name``: the ``user`` option, else ``$HADOOP_USER_NAME`` as for Hadoop's own
clients, else the OS user) unless ``auth="kerberos"``, the extension point for secured
clusters (it needs the ``requests-kerberos`` package and a ticket in the credential cache).

This module is the only one that imports ``hdfs``, and :func:`_translated` is the only
place where its errors (``RemoteException``s, HTTP failures) become storage errors.
"""

from __future__ import annotations

import getpass
import io
import logging
import os
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, BinaryIO, TypeVar, cast

import requests
from hdfs import HdfsError, InsecureClient
from hdfs.client import Client

from sparkpoint.storage.errors import (
    FileAlreadyExists,
    FileNotFound,
    PermissionDenied,
    StorageError,
    StorageUnavailable,
)
from sparkpoint.storage.filesystem import FileStatus, check_range
from sparkpoint.storage.uri import Uri, parse

DEFAULT_WEBHDFS_PORT = 9870
DEFAULT_SWEBHDFS_PORT = 9871
DEFAULT_TIMEOUT_S = 60.0
# A NameNode keeps sending clients to a DataNode that died until it marks it stale
# (dfs.namenode.stale.datanode.interval, 30 s by default; with avoid.read/write.stale on)
# and the NameNode itself may be restarting: calls that can be repeated are, for this long.
DEFAULT_RETRY_S = 45.0
_RETRY_PAUSE_S = 0.5
_SPOOL_IN_MEMORY = 16 * 1024 * 1024
T = TypeVar("T")

# The hdfs package logs every call at INFO: a coordinator's log would be mostly that.
if logging.getLogger("hdfs").level == logging.NOTSET:
    logging.getLogger("hdfs").setLevel(logging.WARNING)
_PERMISSION_EXCEPTIONS = {"AccessControlException", "SecurityException", "AuthorizationException"}
_SAFE_MODE_EXCEPTIONS = {"SafeModeException"}
# A DataNode serving WebHDFS could not reach the NameNode (restarting, or failing over).
_UNREACHABLE_BEHIND = {
    "ConnectException", "EOFException", "RetriableException", "StandbyException",
    "SocketTimeoutException", "NoRouteToHostException",
}  # fmt: skip
_NO_SPACE_EXCEPTIONS = {
    "DSQuotaExceededException", "NSQuotaExceededException", "QuotaExceededException",
    "DiskOutOfSpaceException",
}  # fmt: skip


@contextmanager
def _translated(action: str, path: str, address: str) -> Iterator[None]:
    """The one place where WebHDFS and HTTP failures become storage errors."""
    try:
        yield
    except HdfsError as exc:
        remote, message = exc.exception, _summary(exc.message)
        if remote == "FileNotFoundException":
            raise FileNotFound(f"no such file or directory: {path} ({message})", path=path) from exc
        if remote == "FileAlreadyExistsException":
            raise FileAlreadyExists(f"already exists: {path} ({message})", path=path) from exc
        if remote in _PERMISSION_EXCEPTIONS:
            raise PermissionDenied(
                f"{action} {path}: permission denied ({message})", path=path
            ) from exc
        if remote in _SAFE_MODE_EXCEPTIONS or "safe mode" in message.lower():
            raise StorageUnavailable(
                f"{action} {path}: HDFS is in safe mode (read-only until the NameNode "
                f"leaves it): {message}",
                path=path,
            ) from exc
        if remote in _NO_SPACE_EXCEPTIONS:
            raise StorageError(
                f"{action} {path}: no space left on HDFS ({message})", path=path
            ) from exc
        if remote in _UNREACHABLE_BEHIND:
            raise StorageUnavailable(
                f"{action} {path}: HDFS did not answer behind WebHDFS at {address} "
                f"({remote}: {message}); the operation may or may not have been applied",
                path=path,
            ) from exc
        detail = f"{remote}: {message}" if remote else message
        raise StorageError(f"{action} {path} failed on HDFS: {detail}", path=path) from exc
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise StorageUnavailable(
            f"{action} {path}: WebHDFS at {address} is unreachable "
            f"({type(exc).__name__}); the operation may or may not have been applied",
            path=path,
        ) from exc
    except requests.RequestException as exc:
        raise StorageError(f"{action} {path}: HTTP failure: {exc}", path=path) from exc
    except (KeyError, ValueError) as exc:
        # The server answered outside the documented REST API (no Location, not JSON, …).
        raise StorageError(
            f"{action} {path}: unexpected answer from WebHDFS at {address}: {exc!r}", path=path
        ) from exc


def _summary(message: object) -> str:
    """A RemoteException's message without the server's Java stack trace; an HTML page
    (a proxy or gateway answering instead of WebHDFS) reduced to saying so."""
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    if text.startswith(("b'", 'b"')):
        text = text[2:-1]
    if "<html" in text.lower():
        return "an HTML page instead of a WebHDFS answer (a proxy or gateway in between?)"
    return text.split("\n\tat ", 1)[0].split("\n", 1)[0].strip()


class _RemoteReader(io.RawIOBase):
    """A streamed OPEN whose read failures are translated like every other call."""

    def __init__(self, raw: Any, path: str, address: str) -> None:
        self._raw = raw
        self._path = path
        self._address = address

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with _translated("read", self._path, self._address):
            data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _HdfsOutputFile:
    """Spooled locally, uploaded by one CREATE (overwrite=false) on close: a reader never
    sees a half-written state file, and a name already taken fails the close."""

    def __init__(self, fs: WebHdfsFileSystem, path: str) -> None:
        self._fs = fs
        self._path = path
        self._spool: tempfile.SpooledTemporaryFile[bytes] | None = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (lives until close/abort)
            max_size=_SPOOL_IN_MEMORY
        )

    def write(self, data: bytes) -> int:
        if self._spool is None:
            raise StorageError(f"write to closed file {self._path}", path=self._path)
        return self._spool.write(data)

    def close(self) -> None:
        if self._spool is None:
            return
        spool, self._spool = self._spool, None
        try:
            spool.seek(0)
            self._fs._upload(self._path, spool)
        except FileAlreadyExists:
            raise
        except StorageError:
            self._fs._delete_quietly(self._path)  # a partial upload under our own name
            raise
        finally:
            spool.close()

    def abort(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None


class WebHdfsFileSystem:
    """One HDFS namespace. Holds configuration only: the HTTP client is made on first
    use, and is not pickled, so a copy can travel to a Spark executor."""

    def __init__(
        self,
        scheme: str,
        authority: str,
        *,
        user: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry_s: float = DEFAULT_RETRY_S,
        webhdfs_port: int = DEFAULT_WEBHDFS_PORT,
        auth: str = "simple",
    ) -> None:
        if auth not in ("simple", "kerberos"):
            raise StorageError(f"unknown HDFS auth {auth!r} (use 'simple' or 'kerberos')")
        self.scheme = scheme
        self.authority = authority
        # Hadoop's own clients take the user from HADOOP_USER_NAME under simple auth.
        self.user = user or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
        self.timeout = float(timeout)
        self.retry_s = float(retry_s)
        self.auth = auth
        host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "")
        if scheme == "hdfs":
            self.address = f"http://{host}:{webhdfs_port}"
        elif scheme == "swebhdfs":
            self.address = f"https://{host or authority}:{port or DEFAULT_SWEBHDFS_PORT}"
        else:
            self.address = f"http://{host or authority}:{port or DEFAULT_WEBHDFS_PORT}"
        self._client_instance: Client | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client_instance"] = None  # never ship a live connection pool
        return state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WebHdfsFileSystem) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[str, ...]:
        return (self.scheme, self.authority, self.address, self.user, self.auth)

    def __repr__(self) -> str:
        return f"WebHdfsFileSystem({self.scheme}://{self.authority}, via {self.address})"

    def _client(self) -> Client:
        if self._client_instance is None:
            session = requests.Session()
            if self.auth == "kerberos":
                try:
                    from hdfs.ext.kerberos import KerberosClient
                except ImportError as exc:
                    raise StorageError(
                        "HDFS auth 'kerberos' needs the requests-kerberos package "
                        "(pip install 'hdfs[kerberos]') and a Kerberos ticket"
                    ) from exc
                self._client_instance = KerberosClient(
                    self.address, timeout=self.timeout, session=session
                )
            else:
                self._client_instance = InsecureClient(
                    self.address, user=self.user, timeout=self.timeout, session=session
                )
            # The pooled connections close with this filesystem, not whenever the garbage
            # collector finds their sockets (a ResourceWarning, and descriptors held).
            weakref.finalize(self, session.close)
        return self._client_instance

    def _hdfs_path(self, path: str) -> tuple[Uri, str]:
        uri = parse(path)
        if uri.scheme and (uri.scheme, uri.authority) != (self.scheme, self.authority):
            raise StorageError(f"{path} is not on {self.scheme}://{self.authority}", path=path)
        if not uri.scheme:
            uri = Uri(self.scheme, self.authority, uri.path)
        return uri, uri.path

    def _call(self, action: str, path: str) -> Any:
        return _translated(action, path, self.address)

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, again while HDFS does not answer (StorageUnavailable), for up to
        ``retry_s``: only for calls whose repetition does what one call would."""
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                return attempt()
            except StorageUnavailable:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_RETRY_PAUSE_S)  # a pause between attempts, not a synchronisation

    # -- queries --------------------------------------------------------------------

    def status(self, path: str) -> FileStatus:
        uri, hpath = self._hdfs_path(path)

        def attempt() -> FileStatus:
            with self._call("status of", path):
                return _status(str(uri), self._client().status(hpath))

        return self._retrying(attempt)

    def exists(self, path: str) -> bool:
        try:
            self.status(path)
        except FileNotFound:
            return False
        return True

    def list(self, path: str) -> list[FileStatus]:
        uri, hpath = self._hdfs_path(path)

        def attempt() -> list[FileStatus]:
            with self._call("list", path):
                entries = self._client().list(hpath, status=True)
                return sorted(
                    (_status(str(uri.child(n)), st) for n, st in entries), key=lambda s: s.path
                )

        return self._retrying(attempt)

    def read(self, path: str) -> bytes:
        _, hpath = self._hdfs_path(path)

        def attempt() -> bytes:
            with self._call("read", path), self._client().read(hpath) as reader:
                return cast(bytes, reader.read())

        return self._retrying(attempt)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        check_range(path, offset, length)
        _, hpath = self._hdfs_path(path)
        if length == 0:
            self.status(path)  # still a FileNotFound for a missing file
            return b""

        def attempt() -> bytes:
            with (
                self._call("read", path),
                self._client().read(hpath, offset=offset, length=length) as reader,
            ):
                return cast(bytes, reader.read())

        try:
            return self._retrying(attempt)
        except (FileNotFound, StorageUnavailable):
            raise
        except StorageError:
            # A NameNode refuses an OPEN at or past the end ("out of the range"); the
            # contract reads nothing there.
            if offset >= self.status(path).size:
                return b""
            raise

    @contextmanager
    def open_read(self, path: str) -> Iterator[BinaryIO]:
        _, hpath = self._hdfs_path(path)
        context = self._client().read(hpath)

        def attempt() -> Any:
            with self._call("open", path):
                return context.__enter__()

        raw = self._retrying(attempt)
        try:
            yield cast(BinaryIO, io.BufferedReader(_RemoteReader(raw, path, self.address)))
        finally:
            context.__exit__(None, None, None)

    # -- changes --------------------------------------------------------------------

    def mkdirs(self, path: str) -> None:
        _, hpath = self._hdfs_path(path)

        def attempt() -> None:
            with self._call("mkdirs", path):
                self._client().makedirs(hpath)

        self._retrying(attempt)

    def create(self, path: str) -> _HdfsOutputFile:
        self._hdfs_path(path)
        return _HdfsOutputFile(self, path)

    def _upload(self, path: str, data: bytes | BinaryIO) -> None:
        _, hpath = self._hdfs_path(path)
        tries = 0

        def attempt() -> None:
            nonlocal tries
            if tries:  # a DataNode died under the upload: our own partial file goes first
                self._delete_quietly(path)
                if not isinstance(data, bytes):
                    data.seek(0)
            tries += 1
            with self._call("create", path):
                self._client().write(hpath, data=data, overwrite=False)

        self._retrying(attempt)

    def create_exclusive(self, path: str, data: bytes) -> None:
        self._upload(path, data)

    def write_atomic(self, path: str, data: bytes) -> None:
        uri, _ = self._hdfs_path(path)
        if self.exists(path):
            raise FileAlreadyExists(f"already exists: {path}", path=path)
        temp = str(uri.parent.child(f".{uri.name}.{uuid.uuid4().hex}.inprogress"))
        try:
            self._upload(temp, data)
            self.rename(temp, path)
        except BaseException:
            self._delete_quietly(temp)
            raise

    def rename(self, source: str, target: str) -> None:
        _, src = self._hdfs_path(source)
        _, dst = self._hdfs_path(target)
        # HDFS moves a source *into* an existing target directory; we never want that.
        if self.exists(target):
            raise FileAlreadyExists(f"rename {source}: target exists: {target}", path=target)
        try:
            with self._call("rename", source):
                self._client().rename(src, dst)
        except StorageError:
            # RENAME answers {"boolean": false} without saying why; find out.
            if self.exists(target):
                raise FileAlreadyExists(
                    f"rename {source}: target exists: {target}", path=target
                ) from None
            if not self.exists(source):
                raise FileNotFound(f"no such file or directory: {source}", path=source) from None
            raise

    def delete(self, path: str, *, recursive: bool = False) -> bool:
        _, hpath = self._hdfs_path(path)
        with self._call("delete", path):
            return bool(self._client().delete(hpath, recursive=recursive))

    def _delete_quietly(self, path: str) -> None:
        # Clean-up after a failure that is already being reported: a second error here
        # would only hide the first one, and leftovers are what the orphan collector is for.
        with suppress(StorageError):
            self.delete(path)


def _status(path: str, st: dict[str, Any]) -> FileStatus:
    is_dir = st["type"] == "DIRECTORY"
    return FileStatus(path, is_dir, 0 if is_dir else int(st["length"]), int(st["modificationTime"]))
