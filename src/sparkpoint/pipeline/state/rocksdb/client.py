"""The tasks' side of the store server (server.py): a connection per Python worker and
server, kept across tasks, and :class:`RemoteStore`, a subtask store held open by the
server with :class:`~.store.SubtaskStore`'s interface — one request per multi-get, one
per step's commit, range scans in pages.

The first task on a host that needs the server starts it, under the directory's lock
file so two workers never start two; a server that died (killed, or ended when idle) is
started again by the next task that finds no one listening."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any

from sparkpoint.pipeline.state.backend import StoreSettings
from sparkpoint.pipeline.state.rocksdb.server import (
    KEY_FILE,
    LOCK_FILE,
    LOG_FILE,
    PID_FILE,
    socket_path,
)
from sparkpoint.pipeline.state.rocksdb.store import (
    KEY_GROUP,
    StoreMismatch,
    StoreToken,
    due_timer_bounds,
    key_group_bounds,
)

#: Entries per page of a range scan.
PAGE = 20_000
#: How long a started server may take to listen.
START_TIMEOUT_S = 60.0

#: This process's connections, per server directory (with the pid that made them: a
#: forked child must not share its parent's).
_connections: dict[Path, tuple[int, Connection]] = {}


class ServerGone(RuntimeError):
    """The store server went away during a request (killed, or ended)."""


def _authkey(directory: Path) -> bytes:
    return (directory / KEY_FILE).read_bytes()


def _connect(directory: Path) -> Connection:
    return Client(socket_path(directory), "AF_UNIX", authkey=_authkey(directory))


def _start(directory: Path, idle_s: float) -> Connection:
    """Connect to the directory's server, starting it first if no one listens."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / LOCK_FILE).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):
            return _connect(directory)
        key = directory / KEY_FILE
        if not key.exists():
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        with contextlib.suppress(FileNotFoundError):
            (directory / PID_FILE).unlink()
        command = [sys.executable, "-m", "sparkpoint.pipeline.state.rocksdb.server"]
        with (directory / LOG_FILE).open("ab") as log:
            launcher = subprocess.Popen(
                [*command, str(directory), str(idle_s)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        launcher.wait()  # it forks the server and exits at once
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                return _connect(directory)
            except OSError:
                if time.monotonic() > deadline:
                    log_tail = (directory / LOG_FILE).read_text(errors="replace")[-2000:]
                    raise RuntimeError(
                        f"the store server of {directory} did not start: {log_tail}"
                    ) from None
                time.sleep(0.05)  # waiting for the new process to listen


def _connection(directory: Path, idle_s: float) -> Connection:
    held = _connections.get(directory)
    if held is not None:
        pid, conn = held
        # A connection whose server is gone reads as ready (end of file): drop it.
        if pid == os.getpid() and not conn.closed and not conn.poll(0):
            return conn
        _connections.pop(directory)
        if pid == os.getpid():
            conn.close()
    conn = _start(directory, idle_s)
    _connections[directory] = (os.getpid(), conn)
    return conn


def _call(directory: Path, idle_s: float, *request: Any) -> Any:
    conn = _connection(directory, idle_s)
    try:
        conn.send(request)
        kind, value = conn.recv()
    except (EOFError, OSError) as exc:
        _connections.pop(directory, None)
        conn.close()
        raise ServerGone(f"the store server of {directory} went away: {exc!r}") from exc
    if kind == "mismatch":
        raise StoreMismatch(value)
    if kind == "error":
        raise RuntimeError(f"store server of {directory}: {value}")
    return value


class StoreServerClient:
    """The requests a task makes of its host's store server for ``directory``."""

    def __init__(self, directory: Path, settings: StoreSettings) -> None:
        self.directory = directory
        self.settings = settings

    def call(self, *request: Any) -> Any:
        return _call(self.directory, self.settings.server_idle_seconds, *request)

    def open_existing(self, path: Path) -> RemoteStore | None:
        """The store at ``path``, opened by the server if it is not yet; None if there is
        none. Safe to repeat: a worker whose server went away between tasks asks again."""
        try:
            opened = self.call("open", str(path), self.settings)
        except ServerGone:
            opened = self.call("open", str(path), self.settings)
        if opened is None:
            return None
        return RemoteStore(self, path, *opened)

    def release(self, path: Path) -> None:
        """Have the server close the store at ``path`` (a task builds it again)."""
        self.call("release", str(path))


class RemoteStore:
    """A subtask store held open by the server: SubtaskStore's interface for a task."""

    def __init__(self, client: StoreServerClient, path: Path, version: int, instance: str):
        self._client = client
        self.path = path
        self.version = version
        self.instance = instance

    def _call(self, op: str, *args: Any) -> Any:
        return self._client.call(op, str(self.path), *args)

    def token(self, index: int) -> StoreToken:
        return StoreToken(index, self.version, self.instance)

    def matches(self, token: StoreToken) -> bool:
        return self.instance == token.instance and self.version == token.version

    def prepare_step(self, token: StoreToken) -> None:
        self.version = self._call("prepare", token)

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self._call("get", keys) if keys else []

    def commit_step(
        self, token: StoreToken, changes: list[tuple[bytes, bytes | None, bytes | None]]
    ) -> StoreToken:
        new_token: StoreToken = self._call("commit", token, list(changes))
        self.version = new_token.version
        return new_token

    def _scan(self, lower: bytes, upper: bytes) -> Iterator[tuple[bytes, bytes]]:
        while True:
            page = self._call("page", lower, upper, PAGE)
            yield from page
            if len(page) < PAGE:
                return
            lower = page[-1][0] + b"\x00"  # the next key after the page's last

    def due_timer_keys(self, domain: int, up_to: int) -> Iterator[bytes]:
        lower, upper, skip = due_timer_bounds(domain, up_to)
        for key, _ in self._scan(lower, upper):
            yield key[skip:]

    def entries(self, start: int, end: int) -> Iterator[tuple[int, bytes, bytes]]:
        lower, upper = key_group_bounds(start, end)
        for key, value in self._scan(lower, upper):
            yield KEY_GROUP.unpack_from(key)[0], key[KEY_GROUP.size :], value

    def checkpoint(self, target: Path) -> None:
        self._call("checkpoint", str(target))

    def close(self) -> None:
        """Nothing to do: the server keeps the store open for the next epoch."""


def server_status(directory: Path) -> dict[str, Any] | None:
    """The running server's pid and how often it opened each store; None if none runs."""
    try:
        conn = _connect(directory)
    except OSError:
        return None
    with conn:
        conn.send(("status",))
        return conn.recv()[1]


def stop_server(directory: Path, timeout_s: float = 30.0) -> None:
    """Stop the directory's server on this host, if one runs (it closes its stores), and
    wait until its process is gone."""
    try:
        conn = _connect(directory)
    except OSError:
        return  # none runs (or its key is gone with the directory: it ends by itself)
    with conn:
        conn.send(("status",))
        pid = conn.recv()[1]["pid"]
        conn.send(("stop",))
        with contextlib.suppress(EOFError, OSError):
            conn.recv()
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)  # waiting for the process to exit


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
