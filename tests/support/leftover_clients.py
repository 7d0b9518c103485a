"""Clients of stopped servers, left behind in the processes of the test session.

A client a job or a test forgot keeps reconnecting to its server after the server is
gone; from a long-lived process (pytest itself, Spark's Python workers) it then connects
to whatever listens on that port next — once, Spark's own local socket server of a
``collect()``, which failed its authentication and killed the driver. So when a fixture
stops a Kafka, RabbitMQ, PostgreSQL or ZooKeeper server, :class:`ClientWatch` records its
client ports and listens on each itself (a tripwire: a client that reconnects lands there
and is named by its process), and at the end of the session every process of the session
(pytest and its descendants) still connected to such a port, or caught connecting again,
fails the run. As a plugin (``pytest_plugins``) it watches the fixtures of the session.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper

_LISTEN = 0x0A  # TCP states as /proc/net/tcp writes them


@dataclass(frozen=True, slots=True)
class StoppedServer:
    what: str  # "Kafka", "RabbitMQ", ...
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.what} {self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class LeftBehind:
    """A process of the session connected (or connecting again) to a stopped server."""

    pid: int
    command: str
    server: StoppedServer
    how: str  # "still connected" or "connected again"

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command}) {self.how} to {self.server} after it stopped"


def client_ports(server: object) -> list[StoppedServer]:
    """The ports clients of ``server`` connect to (none for anything else)."""
    if isinstance(server, LocalKafka):
        return [StoppedServer("Kafka", "127.0.0.1", n.port) for n in server.nodes]
    if isinstance(server, RabbitMQServer):
        return [StoppedServer("RabbitMQ", "127.0.0.1", server.port)]
    if isinstance(server, PostgresServer):
        return [StoppedServer("PostgreSQL", "127.0.0.1", server.port)]
    if isinstance(server, LocalZooKeeper):
        return [
            StoppedServer("ZooKeeper", server.host, port)
            for s in server.servers
            for port in (s.client_port, s.secure_port)
            if port
        ]
    return []


class ClientWatch:
    """Watches the ports of stopped servers for clients of the process tree of ``root``.

    >>> watch = ClientWatch()                 # doctest: +SKIP
    >>> kafka.stop(); watch.stopped(kafka)    # doctest: +SKIP
    >>> watch.left_behind()                   # doctest: +SKIP
    [LeftBehind(pid=4242, command='python3 -m pyspark.daemon', ...)]
    """

    def __init__(self, root: int | None = None) -> None:
        self.root = root if root is not None else os.getpid()
        self._servers: dict[int, StoppedServer] = {}
        self._unarmed: dict[int, StoppedServer] = {}  # watched, without a tripwire yet
        self._caught: dict[tuple[int, int], LeftBehind] = {}
        self._held: list[socket.socket] = []  # connections the tripwires accepted
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="client-watch", daemon=True)
        self._thread.start()

    def stopped(self, server: object) -> list[StoppedServer]:
        """``server`` stopped: watch its client ports. A port another program listens on
        meanwhile is not watched (its connections are that program's business); one that
        cannot be bound only because of the old server's connections is watched for
        clients still connected, and gets its tripwire as soon as it can be bound."""
        watched = []
        for stopped in client_ports(server):
            if stopped.port in self._servers or _listening(self.root, stopped.port):
                continue
            with self._lock:
                self._servers[stopped.port] = stopped
                self._unarmed[stopped.port] = stopped
            watched.append(stopped)
        self._arm()
        return watched

    def _arm(self) -> None:
        """Listen on every watched port that has no tripwire yet, where possible."""
        with self._lock:
            unarmed = list(self._unarmed.values())
        for stopped in unarmed:
            tripwire = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tripwire.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                tripwire.bind((stopped.host, stopped.port))
            except OSError:
                tripwire.close()  # a connection of the old server holds it: later
                continue
            tripwire.listen(64)
            tripwire.setblocking(False)
            with self._lock:
                del self._unarmed[stopped.port]
            self._selector.register(tripwire, selectors.EVENT_READ, stopped)
            self._wake_w.send(b"x")

    @property
    def watched(self) -> list[StoppedServer]:
        with self._lock:
            return list(self._servers.values())

    def left_behind(self) -> list[LeftBehind]:
        """Every process of the tree caught connecting again since its server stopped,
        and every one connected now."""
        self._arm()
        with self._lock:
            servers = dict(self._servers)
            found = dict(self._caught)
        for client in connected_to(self.root, servers):
            found.setdefault((client.pid, client.server.port), client)
        return sorted(found.values(), key=lambda c: (c.server.port, c.pid))

    def close(self) -> None:
        self._closed = True
        self._wake_w.send(b"x")
        self._thread.join(10)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()
        self._wake_w.close()
        for conn in self._held:
            conn.close()

    def _serve(self) -> None:
        while not self._closed:
            for key, _ in self._selector.select():
                if key.fileobj is self._wake_r:
                    self._wake_r.recv(4096)
                    continue
                with contextlib.suppress(BlockingIOError):
                    conn, peer = key.fileobj.accept()  # type: ignore[union-attr]
                    self._caught_connecting(conn, peer, key.data)

    def _caught_connecting(self, conn: socket.socket, peer: Any, server: StoppedServer) -> None:
        # The client waits for the server's greeting with its socket open: it is still
        # there to be found. Kept open, so it does not come back every backoff.
        clients = [c for c in connected_to(self.root, {server.port: server}) if c.port == peer[1]]
        if not clients:
            conn.close()  # not ours (or gone already)
            return
        self._held.append(conn)
        with self._lock:
            for client in clients:
                self._caught.setdefault(
                    (client.pid, server.port),
                    LeftBehind(client.pid, client.command, server, "connected again"),
                )


@dataclass(frozen=True, slots=True)
class _Client(LeftBehind):
    port: int = 0  # the client's own (local) port


def connected_to(root: int, servers: dict[int, StoppedServer]) -> list[_Client]:
    """Processes of ``root``'s tree with a TCP socket whose remote port is one of
    ``servers`` (listeners aside)."""
    if not servers:
        return []
    owners = _socket_owners(_tree(root))
    found = []
    for local_port, remote_port, state, inode in _tcp_sockets(root):
        server = servers.get(remote_port)
        if server is None or state == _LISTEN or inode not in owners:
            continue
        pid = owners[inode]
        found.append(_Client(pid, _command(pid), server, "still connected", local_port))
    return found


def _listening(pid: int, port: int) -> bool:
    """Some program listens on ``port`` (in ``pid``'s network namespace)."""
    return any(local == port and state == _LISTEN for local, _, state, _ in _tcp_sockets(pid))


def _tree(root: int) -> set[int]:
    """``root`` and its descendants, from the parent pid of every process."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def _socket_owners(pids: Iterable[int]) -> dict[int, int]:
    """Socket inode → pid, over the file descriptors of ``pids``."""
    owners: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = str(Path(fd.path).readlink())
                    if target.startswith("socket:["):
                        owners[int(target[8:-1])] = pid
    return owners


def _tcp_sockets(pid: int) -> Iterator[tuple[int, int, int, int]]:
    """(local port, remote port, state, inode) of every TCP socket of ``pid``'s network
    namespace (IPv4 and IPv6)."""
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
            for line in lines:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                yield (
                    int(local.rsplit(":", 1)[1], 16),
                    int(remote.rsplit(":", 1)[1], 16),
                    int(state, 16),
                    int(inode),
                )


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160] or "?"


# -- the plugin ------------------------------------------------------------------------


class _Session:
    """The session's watch (opened at the first server a fixture stops) and findings."""

    watch: ClassVar[ClientWatch | None] = None
    found: ClassVar[list[str]] = []


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any]) -> None:
    """After a fixture's teardown: if its value was a server, the server is stopped."""
    result = fixturedef.cached_result
    if result is None or result[2] is not None or not client_ports(result[0]):
        return
    if _Session.watch is None:
        _Session.watch = ClientWatch()
    _Session.watch.stopped(result[0])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """With parallel workers (pytest-xdist) each worker watches its own processes; the
    controller collects what each found (a worker's own exit status is not the run's)."""
    _Session.found.extend(getattr(node, "workeroutput", {}).get("leftover_clients", []))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _Session.watch is not None:
        _Session.found.extend(str(c) for c in _Session.watch.left_behind())
        _Session.watch.close()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a worker: the controller reports and fails the run
        workeroutput["leftover_clients"] = list(_Session.found)
        return
    if _Session.found and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _Session.found or hasattr(terminalreporter.config, "workeroutput"):
        return
    terminalreporter.section("clients of stopped servers left behind", red=True)
    for client in _Session.found:
        terminalreporter.write_line(client)
    terminalreporter.write_line(
        "A client must close when the job, reader or test that opened it is done: it "
        "keeps reconnecting, and reaches whatever listens on the port next."
    )
