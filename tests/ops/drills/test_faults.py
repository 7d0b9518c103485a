"""The drill's TCP fault proxy on real sockets: a line server behind it, a client in
front; each mode per direction does what it says, and healing restores the path."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from sparkpoint.ops.drills.faults import TO_CLIENT, FaultProxy
from tests.support.waiting import wait_until


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError):  # the proxy resets on purpose
            for line in self.rfile:
                self.server.seen.append(line)  # type: ignore[attr-defined]
                self.wfile.write(line)


@pytest.fixture
def echo() -> Iterator[socketserver.ThreadingTCPServer]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: socketserver.ThreadingTCPServer) -> Iterator[FaultProxy]:
    host, port = echo.server_address[:2]
    p = FaultProxy(str(host), int(port))
    yield p
    p.close()


def connect(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(proxy.address, timeout=5)
    return sock


def ask(sock: socket.socket, line: bytes, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    sock.sendall(line)
    return sock.recv(100)


def test_pass_and_delay_deliver(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert ask(sock, b"one\n") == b"one\n"
        proxy.delay(0.2, TO_CLIENT)
        assert ask(sock, b"two\n") == b"two\n"


def test_dropped_replies_reach_the_server_and_the_link_resets_when_healed(
    proxy: FaultProxy, echo: socketserver.ThreadingTCPServer
) -> None:
    with connect(proxy) as sock:
        assert ask(sock, b"one\n") == b"one\n"
        proxy.drop(TO_CLIENT)
        sock.sendall(b"applied\n")
        wait_until(lambda: b"applied\n" in echo.seen, timeout=10,  # type: ignore[attr-defined]
                   message="the request delivered to the server")  # fmt: skip
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(100)
        proxy.heal()  # the stream lost bytes: it cannot go on
        sock.settimeout(5)
        with pytest.raises(ConnectionResetError):
            while sock.recv(100):
                pass
    with connect(proxy) as sock:
        assert ask(sock, b"again\n") == b"again\n"


def test_black_hole_hangs_new_connections_until_healed(proxy: FaultProxy) -> None:
    proxy.black_hole()
    with connect(proxy) as sock:
        sock.settimeout(0.3)
        sock.sendall(b"lost\n")
        with pytest.raises(TimeoutError):
            sock.recv(100)
        proxy.heal()
        sock.settimeout(5)
        assert sock.recv(100) == b"lost\n"


def test_reset_cuts_open_and_new_connections(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert ask(sock, b"one\n") == b"one\n"
        proxy.reset()
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            ask(sock, b"two\n")
    with pytest.raises((ConnectionResetError, BrokenPipeError)), connect(proxy) as sock:
        ask(sock, b"three\n")
