"""A socket-level TCP fault proxy: put it between a client and its server (a coordinator and
its ZooKeeper servers, a test's client and its server), then break the link in one
direction or both while it runs (standard library only).

Usage::

    with FaultProxy("127.0.0.1", zk_port) as proxy:
        client = KazooClient(hosts=proxy.connect_string)  # connect through the proxy
        ...
        proxy.drop(TO_CLIENT)          # requests still reach the server, replies vanish
        ...                            # a write is applied, its reply is lost
        wait_until(lambda: proxy.dropped[TO_CLIENT] > 0, ...)
        proxy.reset()                  # RST every connection, refuse new ones
        proxy.heal()                   # both directions pass again; new connections work

Directions are ``TO_SERVER`` (client → server bytes) and ``TO_CLIENT`` (server → client);
every fault method takes ``direction`` (one of them or ``BOTH``). Faults apply to existing
and new connections alike and can be switched at any time:

- ``heal(direction=BOTH)``: pass bytes through (the initial state).
- ``delay(seconds, direction=BOTH)``: each chunk read is forwarded no earlier than
  ``seconds`` after it was read (order kept; chunks of one direction queue behind each
  other).
- ``drop(direction=TO_CLIENT)``: read and discard (counted in ``proxy.dropped``). On
  ``TO_CLIENT``: the request is delivered and applied, its reply is swallowed — the
  ambiguous "applied, reply lost" outcome. A TCP stream cannot lose bytes and go on, so
  when the drop ends every connection that lost bytes is reset (as the real path would
  end it after its retransmissions), rather than carrying on with a hole in the stream.
- ``black_hole(direction=BOTH)``: stop reading; nothing is forwarded, connections stay
  open, bytes wait in the kernel's buffers and flow again after ``heal`` (a partition
  that heals, or a paused peer).
- ``reset()``: close every open connection with a TCP RST (both sides see "connection
  reset") and reset each new one as soon as it is accepted, until ``heal()``.

Counters (bytes, per direction): ``proxy.forwarded`` and ``proxy.dropped``; ``proxy.accepted``
counts connections accepted, ``proxy.open_connections`` those still open. Each connection
has one thread per direction; ``close()`` (or leaving the ``with`` block) closes every
socket and joins every thread. :class:`ProxyGroup` is one proxy per server of a quorum.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass

TO_SERVER = "to_server"
TO_CLIENT = "to_client"
BOTH = "both"
_DIRECTIONS = (TO_SERVER, TO_CLIENT)
_CHUNK = 65536
_JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # "pass" | "delay" | "drop" | "black_hole"
    seconds: float = 0.0


_PASS = Fault("pass")


def _linger_zero(sock: socket.socket) -> None:
    """Make close() send RST instead of FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class _Link:
    """One proxied connection: the accepted client socket, the socket to the server, and
    one pump thread per direction. The last pump to finish closes both sockets, so no fd
    is closed while another thread may still select on it."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.closing = threading.Event()
        self.rst = False
        #: Bytes of this connection were dropped: it is reset when the drop ends.
        self.lost = False
        self._lock = threading.Lock()
        self._running = 2
        self.threads = [
            threading.Thread(
                target=self._pump,
                args=(client, server, TO_SERVER),
                daemon=True,
                name=f"faultproxy-{TO_SERVER}",
            ),
            threading.Thread(
                target=self._pump,
                args=(server, client, TO_CLIENT),
                daemon=True,
                name=f"faultproxy-{TO_CLIENT}",
            ),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def close(self, *, rst: bool) -> None:
        """Wake both pumps; the sockets are closed by the last one to exit."""
        with self._lock:
            if self.closing.is_set():
                return
            self.rst = rst
            self.closing.set()
        for sock in (self.client, self.server):
            # SHUT_RD wakes a pump blocked in recv without sending a FIN, so an RST can
            # still follow; without rst, SHUT_RDWR sends the FIN at once.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD if rst else socket.SHUT_RDWR)
        self.proxy._notify()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while not self.closing.is_set():
                fault = self.proxy._wait_readable_fault(direction, self.closing)
                if fault is None:
                    break
                data = src.recv(_CHUNK)
                if not data:
                    break
                read_at = time.monotonic()
                # The fault that counts is the one in force when the bytes came in; a black
                # hole that started meanwhile holds them until it ends.
                fault = self.proxy._wait_readable_fault(direction, self.closing)
                if fault is None:
                    break
                if fault.kind == "drop":
                    self.lost = True
                    self.proxy._count(self.proxy.dropped, direction, len(data))
                    continue
                if fault.kind == "delay":
                    remaining = read_at + fault.seconds - time.monotonic()
                    if remaining > 0 and self.closing.wait(remaining):
                        break
                dst.sendall(data)
                self.proxy._count(self.proxy.forwarded, direction, len(data))
        except OSError:
            pass  # the other side went away, or close() shut the socket down
        finally:
            self.close(rst=self.rst)
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                for sock in (self.client, self.server):
                    if self.rst:
                        _linger_zero(sock)
                    sock.close()
                self.proxy._forget(self)


class FaultProxy:
    """Listens on 127.0.0.1 (ephemeral port) and forwards each connection to ``host:port``
    under the faults in force; see the module docstring."""

    def __init__(self, host: str, port: int, *, listen_host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self.forwarded: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.accepted = 0
        self._faults = {TO_SERVER: _PASS, TO_CLIENT: _PASS}
        self._resetting = False
        self._changed = threading.Condition()
        self._links: set[_Link] = set()
        self._closed = False
        self._listener = socket.create_server((listen_host, 0))
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(
            target=self._accept_loop, daemon=True, name="faultproxy-accept"
        )
        self._acceptor.start()

    # --- addresses ------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    @property
    def connect_string(self) -> str:
        host, port = self.address
        return f"{host}:{port}"

    @property
    def open_connections(self) -> int:
        with self._changed:
            return len(self._links)

    # --- faults ---------------------------------------------------------------------------

    def heal(self, direction: str = BOTH) -> None:
        """Pass bytes through again (and stop resetting new connections)."""
        self._set(direction, _PASS)

    def delay(self, seconds: float, direction: str = BOTH) -> None:
        if seconds < 0:
            raise ValueError(f"delay must be >= 0 seconds, got {seconds}")
        self._set(direction, Fault("delay", seconds))

    def drop(self, direction: str = TO_CLIENT) -> None:
        self._set(direction, Fault("drop"))

    def black_hole(self, direction: str = BOTH) -> None:
        self._set(direction, Fault("black_hole"))

    def reset(self) -> None:
        """RST every open connection; new ones are reset on accept until ``heal()``."""
        with self._changed:
            self._resetting = True
            links = list(self._links)
            self._changed.notify_all()
        for link in links:
            link.close(rst=True)

    def fault(self, direction: str) -> Fault:
        with self._changed:
            return self._faults[direction]

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        with self._changed:
            if self._closed:
                return
            self._closed = True
            links = list(self._links)
            self._changed.notify_all()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        self._acceptor.join(_JOIN_TIMEOUT_S)
        self._listener.close()
        for link in links:
            link.close(rst=False)
        for link in links:
            for thread in link.threads:
                thread.join(_JOIN_TIMEOUT_S)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ------------------------------------------------------------------------

    def _set(self, direction: str, fault: Fault) -> None:
        if direction not in (*_DIRECTIONS, BOTH):
            raise ValueError(f"direction must be {TO_SERVER!r}, {TO_CLIENT!r} or {BOTH!r}")
        with self._changed:
            for d in _DIRECTIONS if direction == BOTH else (direction,):
                self._faults[d] = fault
            if fault.kind == "pass" and direction == BOTH:
                self._resetting = False
            dropping = any(f.kind == "drop" for f in self._faults.values())
            holed = [] if dropping else [link for link in self._links if link.lost]
            self._changed.notify_all()
        for link in holed:
            link.close(rst=True)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _wait_readable_fault(self, direction: str, closing: threading.Event) -> Fault | None:
        """The fault in force once it is not a black hole; None when the link closes."""
        with self._changed:
            while True:
                if closing.is_set() or self._closed:
                    return None
                fault = self._faults[direction]
                if fault.kind != "black_hole":
                    return fault
                self._changed.wait()

    def _count(self, counter: Counter[str], direction: str, n: int) -> None:
        with self._changed:
            counter[direction] += n

    def _forget(self, link: _Link) -> None:
        with self._changed:
            self._links.discard(link)
            self._changed.notify_all()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # close() shut the listener down
            with self._changed:
                refuse = self._resetting or self._closed
                if not refuse:
                    self.accepted += 1
            if refuse:
                _linger_zero(client)
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5.0)
                server.settimeout(None)
            except OSError:
                _linger_zero(client)
                client.close()
                continue
            link = _Link(self, client, server)
            with self._changed:
                if self._closed:
                    server.close()
                    client.close()
                    return
                self._links.add(link)
            link.start()


class ProxyGroup:
    """One proxy per server of a quorum, for one client: its connect string goes through
    them, and each fault acts on all at once (a client cut off from the ensemble)."""

    def __init__(self, upstreams: list[tuple[str, int]]) -> None:
        self.proxies = [FaultProxy(host, port) for host, port in upstreams]

    @property
    def connect_string(self) -> str:
        return ",".join(p.connect_string for p in self.proxies)

    def drop(self, direction: str = TO_CLIENT) -> None:
        for p in self.proxies:
            p.drop(direction)

    def black_hole(self, direction: str = BOTH) -> None:
        for p in self.proxies:
            p.black_hole(direction)

    def heal(self) -> None:
        for p in self.proxies:
            p.heal()

    def close(self) -> None:
        for p in self.proxies:
            p.close()


def parse_quorum(quorum: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` (no chroot) as address pairs."""
    out = []
    for part in quorum.split("/", 1)[0].split(","):
        host, _, port = part.strip().rpartition(":")
        out.append((host or "127.0.0.1", int(port)))
    return out
