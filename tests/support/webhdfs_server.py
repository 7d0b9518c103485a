"""A WebHDFS server for tests, written to Hadoop's documented REST API.

It keeps an in-memory namespace and runs two HTTP servers, like a cluster does: the
*namenode* answers metadata operations and redirects CREATE, APPEND and OPEN (307) to the
*datanode*, which moves the bytes. Errors are ``RemoteException`` JSON bodies with
Hadoop's exception names and HTTP status codes.

Reference: https://hadoop.apache.org/docs/stable/hadoop-project-dist/hadoop-hdfs/WebHDFS.html

Not covered: permissions and ACLs, snapshots, xattrs, delegation tokens, checksums,
quotas, ``noredirect``. ``inject_fault`` makes the next matching request fail with a given
answer, for tests of error handling.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

PREFIX = "/webhdfs/v1"

# Hadoop's ExceptionHandler: FileNotFoundException → 404, other IOExceptions → 403,
# IllegalArgumentException / UnsupportedOperationException → 400.
_JAVA_CLASSES = {
    "FileNotFoundException": ("java.io.FileNotFoundException", 404),
    "FileAlreadyExistsException": ("org.apache.hadoop.fs.FileAlreadyExistsException", 403),
    "ParentNotDirectoryException": ("org.apache.hadoop.fs.ParentNotDirectoryException", 403),
    "PathIsNotEmptyDirectoryException": (
        "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
        403,
    ),
    "IOException": ("java.io.IOException", 403),
    "IllegalArgumentException": ("java.lang.IllegalArgumentException", 400),
    "UnsupportedOperationException": ("java.lang.UnsupportedOperationException", 400),
}


@dataclass
class Request:
    handler: _Handler
    method: str
    op: str
    path: str
    params: dict[str, str]
    body: bytes

    @property
    def user(self) -> str:
        return self.params.get("user.name", "dr.who")


class RemoteError(Exception):
    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception = exception
        self.message = message


@dataclass
class _Node:
    is_dir: bool
    owner: str
    file_id: int
    modification_time: int = field(default_factory=lambda: int(time.time() * 1000))
    data: bytearray = field(default_factory=bytearray)
    children: dict[str, _Node] = field(default_factory=dict)


@dataclass
class _Fault:
    op: str
    role: str
    status: int
    body: bytes
    content_type: str
    remaining: int


class Namespace:
    """The file tree, behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._ids = itertools.count(16385)  # HDFS's first inode id
        self.root = _Node(True, "hdfs", next(self._ids))

    @staticmethod
    def parts(path: str) -> list[str]:
        if not path.startswith("/"):
            raise RemoteError("IllegalArgumentException", f"Invalid path name {path}")
        return [p for p in posixpath.normpath(path).split("/") if p]

    def lookup(self, path: str) -> _Node | None:
        node = self.root
        for part in self.parts(path):
            if not node.is_dir or part not in node.children:
                return None
            node = node.children[part]
        return node

    def parent_of(self, path: str, owner: str, *, create: bool) -> tuple[_Node, str] | None:
        parts = self.parts(path)
        if not parts:
            return None
        node = self.root
        walked = ""
        for part in parts[:-1]:
            walked += "/" + part
            child = node.children.get(part)
            if child is None:
                if not create:
                    return None
                child = node.children[part] = _Node(True, owner, next(self._ids))
            if not child.is_dir:
                raise RemoteError(
                    "ParentNotDirectoryException", f"Parent path is not a directory: {walked}"
                )
            node = child
        return node, parts[-1]

    def new_node(self, is_dir: bool, owner: str) -> _Node:
        return _Node(is_dir, owner, next(self._ids))


def _status(node: _Node, suffix: str) -> dict[str, Any]:
    return {
        "accessTime": 0 if node.is_dir else node.modification_time,
        "blockSize": 0 if node.is_dir else 134217728,
        "childrenNum": len(node.children) if node.is_dir else 0,
        "fileId": node.file_id,
        "group": "supergroup",
        "length": 0 if node.is_dir else len(node.data),
        "modificationTime": node.modification_time,
        "owner": node.owner,
        "pathSuffix": suffix,
        "permission": "755" if node.is_dir else "644",
        "replication": 0 if node.is_dir else 3,
        "storagePolicy": 0,
        "type": "DIRECTORY" if node.is_dir else "FILE",
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RoleServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: failures show up as test assertions

    # -- plumbing -------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, payload: Any, status: int = 200) -> None:
        self._send(status, json.dumps(payload).encode())

    def _error(self, error: RemoteError) -> None:
        java_class, status = _JAVA_CLASSES[error.exception]
        self._json(
            {
                "RemoteException": {
                    "exception": error.exception,
                    "javaClassName": java_class,
                    "message": error.message,
                }
            },
            status,
        )

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        body = self._body()  # always drain, so the connection stays usable
        params = {k.lower(): v for k, v in parse_qsl(url.query, keep_blank_values=True)}
        op = params.get("op", "").upper()
        if not url.path.startswith(PREFIX):
            self._send(404, b"Not Found", "text/plain")
            return
        path = unquote(url.path[len(PREFIX) :]) or "/"
        fault = self.server.owner.take_fault(op, self.server.role)
        if fault is not None:
            self._send(fault.status, fault.body, fault.content_type)
            return
        try:
            request = Request(self, self.command, op, path, params, body)
            if self.server.role == "namenode":
                self.server.owner.namenode(request)
            else:
                self.server.owner.datanode(request)
        except RemoteError as error:
            self._error(error)

    do_GET = do_PUT = do_POST = do_DELETE = _dispatch


class _RoleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: WebHdfsServer, role: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner
        self.role = role


class WebHdfsServer:
    """``with WebHdfsServer() as server:`` → ``server.url`` is the namenode's address."""

    def __init__(self) -> None:
        self.ns = Namespace()
        self._faults: list[_Fault] = []
        self._faults_lock = threading.Lock()
        self._namenode = _RoleServer(self, "namenode")
        self._datanode = _RoleServer(self, "datanode")
        self._threads = [
            threading.Thread(target=s.serve_forever, name=f"webhdfs-{s.role}", daemon=True)
            for s in (self._namenode, self._datanode)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._namenode.server_address[1]}"

    @property
    def datanode_url(self) -> str:
        return f"http://127.0.0.1:{self._datanode.server_address[1]}"

    def close(self) -> None:
        for server in (self._namenode, self._datanode):
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> WebHdfsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def inject_fault(
        self,
        op: str,
        *,
        role: str = "namenode",
        status: int = 500,
        body: bytes | dict[str, Any] = b"",
        times: int = 1,
    ) -> None:
        """The next ``times`` requests of ``op`` to ``role`` get this answer instead."""
        if isinstance(body, dict):
            raw, content_type = json.dumps(body).encode(), "application/json"
        else:
            raw, content_type = body, "text/html"
        with self._faults_lock:
            self._faults.append(_Fault(op.upper(), role, status, raw, content_type, times))

    def clear_faults(self) -> int:
        """Forget injected faults; returns how many answers were still unused."""
        with self._faults_lock:
            unused = sum(f.remaining for f in self._faults)
            self._faults.clear()
        return unused

    def take_fault(self, op: str, role: str) -> _Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.op == op and fault.role == role and fault.remaining > 0:
                    fault.remaining -= 1
                    return fault
        return None

    # -- namenode -------------------------------------------------------------------

    def _redirect(self, handler: _Handler, path: str, params: dict[str, str]) -> None:
        query = "&".join(f"{k}={quote(v)}" for k, v in params.items())
        location = f"{self.datanode_url}{PREFIX}{quote(path)}?{query}&namenoderpcaddress=nn:8020"
        handler._send(307, b"", "application/octet-stream", {"Location": location})

    def namenode(self, request: Request) -> None:
        ns, path, key = self.ns, request.path, (request.method, request.op)
        if key in (("PUT", "CREATE"), ("POST", "APPEND"), ("GET", "OPEN")):
            if request.op != "CREATE":  # the namenode locates the blocks of an existing file
                with ns.lock:
                    self._existing_file(path)
            self._redirect(request.handler, path, request.params)
            return
        with ns.lock:
            answer = self._metadata_op(request, key)
        request.handler._json(answer)

    def _existing_file(self, path: str) -> _Node:
        node = self.ns.lookup(path)
        if node is None:
            raise RemoteError("FileNotFoundException", f"File does not exist: {path}")
        if node.is_dir:
            raise RemoteError("FileNotFoundException", f"Path is not a file: {path}")
        return node

    def _metadata_op(self, request: Request, key: tuple[str, str]) -> dict[str, Any]:
        path, params = request.path, request.params
        if key == ("GET", "GETFILESTATUS"):
            node = self.ns.lookup(path)
            if node is None:
                raise RemoteError("FileNotFoundException", f"File does not exist: {path}")
            return {"FileStatus": _status(node, "")}
        if key == ("GET", "LISTSTATUS"):
            node = self.ns.lookup(path)
            if node is None:
                raise RemoteError("FileNotFoundException", f"File {path} does not exist.")
            entries = (
                [_status(child, name) for name, child in sorted(node.children.items())]
                if node.is_dir
                else [_status(node, "")]
            )
            return {"FileStatuses": {"FileStatus": entries}}
        if key == ("GET", "GETHOMEDIRECTORY"):
            return {"Path": f"/user/{request.user}"}
        if key == ("PUT", "MKDIRS"):
            return {"boolean": self._mkdirs(path, request.user)}
        if key == ("PUT", "RENAME"):
            return {"boolean": self._rename(path, params.get("destination", ""))}
        if key == ("DELETE", "DELETE"):
            recursive = params.get("recursive", "false").lower() == "true"
            return {"boolean": self._delete(path, recursive)}
        raise RemoteError(
            "IllegalArgumentException",
            f'Invalid value for webhdfs parameter "op": {request.op or "missing"} '
            f"for {request.method}",
        )

    def _mkdirs(self, path: str, user: str) -> bool:
        node = self.ns.root
        walked = ""
        for part in self.ns.parts(path):
            walked += "/" + part
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = self.ns.new_node(True, user)
            elif not child.is_dir:
                raise RemoteError(
                    "ParentNotDirectoryException", f"Parent path is not a directory: {walked}"
                )
            node = child
        return True

    def _rename(self, source: str, destination: str) -> bool:
        # The old rename: False (not an error) for a missing source, an existing file
        # target, a missing target parent, or a move into itself.
        ns = self.ns
        if not destination.startswith("/"):
            raise RemoteError("IllegalArgumentException", f"Invalid destination {destination!r}")
        src_parts, dst_parts = ns.parts(source), ns.parts(destination)
        node = ns.lookup(source)
        if node is None or not src_parts or dst_parts[: len(src_parts)] == src_parts:
            return False
        target = ns.lookup(destination)
        if target is not None:
            if not target.is_dir or src_parts[-1] in target.children:
                return False
            new_parent, new_name = target, src_parts[-1]
        else:
            found = ns.parent_of(destination, node.owner, create=False)
            if found is None or not found[0].is_dir:
                return False
            new_parent, new_name = found
        old_parent, old_name = ns.parent_of(source, node.owner, create=False)  # type: ignore[misc]
        del old_parent.children[old_name]
        new_parent.children[new_name] = node
        return True

    def _delete(self, path: str, recursive: bool) -> bool:
        ns = self.ns
        node = ns.lookup(path)
        if node is None:
            return False
        if node.is_dir and node.children and not recursive:
            raise RemoteError(
                "PathIsNotEmptyDirectoryException", f"`{path} is non empty': Directory is not empty"
            )
        found = ns.parent_of(path, node.owner, create=False)
        if found is None:  # the root itself
            ns.root.children.clear()
            return True
        parent, name = found
        del parent.children[name]
        return True

    # -- datanode -------------------------------------------------------------------

    def datanode(self, request: Request) -> None:
        method, op, path, params, body = (
            request.method,
            request.op,
            request.path,
            request.params,
            request.body,
        )
        handler, user = request.handler, request.user
        ns = self.ns
        with ns.lock:
            if (method, op) == ("PUT", "CREATE"):
                overwrite = params.get("overwrite", "false").lower() == "true"
                found = ns.parent_of(path, user, create=True)
                if found is None:
                    raise RemoteError("FileAlreadyExistsException", f"{path} already exists")
                parent, name = found
                existing = parent.children.get(name)
                if existing is not None and existing.is_dir:
                    raise RemoteError(
                        "FileAlreadyExistsException", f"{path} already exists as a directory"
                    )
                if existing is not None and not overwrite:
                    raise RemoteError(
                        "FileAlreadyExistsException",
                        f"{path} for client 127.0.0.1 already exists",
                    )
                node = ns.new_node(False, user)
                node.data = bytearray(body)
                parent.children[name] = node
                handler._send(201, b"", headers={"Location": f"hdfs://nn:8020{quote(path)}"})
            elif (method, op) == ("POST", "APPEND"):
                node = self._existing_file(path)
                node.data += body
                node.modification_time = int(time.time() * 1000)
                handler._send(200)
            elif (method, op) == ("GET", "OPEN"):
                node = self._existing_file(path)
                offset = int(params.get("offset") or 0)
                if offset < 0 or offset > len(node.data):
                    raise RemoteError(
                        "IOException",
                        f"Offset={offset} out of the range [0, {len(node.data)}]; "
                        f"the file is {len(node.data)} bytes",
                    )
                length = params.get("length")
                end = len(node.data) if length in (None, "") else offset + int(length)
                data = bytes(node.data[offset:end])
                handler._send(200, data, "application/octet-stream")
            else:
                raise RemoteError(
                    "IllegalArgumentException", f"op={op} is not a datanode operation"
                )
