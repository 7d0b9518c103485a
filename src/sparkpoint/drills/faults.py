"""A TCP fault proxy: put it between a client and its server (a coordinator and its
ZooKeeper servers, a driver and the coordinators) and make either direction misbehave.

Modes, per direction (``to_server``: what the client sends; ``to_client``: the replies):

- ``pass``: bytes go through.
- ``delay``: bytes go through ``delay_s`` late (order kept).
- ``drop``: bytes are read and thrown away — with ``to_client`` set to ``drop`` the
  server receives and applies every request, and the client hears nothing back: the
  ambiguous "applied, reply lost" outcome. A TCP stream cannot lose bytes and go on, so
  when the drop ends every connection that lost bytes is reset (as the real path would
  end it after its retransmissions), rather than carrying on with a hole in the stream.
- ``black-hole``: nothing is read or forwarded; new connections are accepted and left
  hanging (no reply, no reset), as when a network path silently goes away.
- ``reset``: open connections are reset (RST), new ones are reset at once.

Standard library only: a thread per connection direction, ``select`` with a short timeout
so that a mode change takes effect within a tenth of a second.

>>> proxy = FaultProxy(("127.0.0.1", 2181)).start()        # doctest: +SKIP
>>> proxy.set(to_client=Mode.DROP)                           # replies swallowed
>>> proxy.set(Mode.BLACK_HOLE, Mode.BLACK_HOLE)              # cut off
>>> proxy.heal(); proxy.close()
"""

from __future__ import annotations

import contextlib
import enum
import select
import socket
import struct
import threading
from dataclasses import dataclass

POLL_S = 0.1
CHUNK = 65536


class Mode(enum.StrEnum):
    PASS = "pass"
    DELAY = "delay"
    DROP = "drop"
    BLACK_HOLE = "black-hole"
    RESET = "reset"


@dataclass(frozen=True, slots=True)
class Faults:
    to_server: Mode = Mode.PASS
    to_client: Mode = Mode.PASS
    delay_s: float = 0.0


def _reset(sock: socket.socket) -> None:
    # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class FaultProxy:
    """Listens on ``listen`` (default: a free loopback port) and forwards to ``upstream``."""

    def __init__(
        self, upstream: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)
    ) -> None:
        self.upstream = upstream
        self._server = socket.create_server(listen)
        self._server.settimeout(POLL_S)
        self._faults = Faults()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._pairs: list[tuple[socket.socket, socket.socket | None]] = []
        self._lossy: set[socket.socket] = set()  # connections that lost bytes to a drop
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.getsockname()[:2]
        return str(host), int(port)

    @property
    def faults(self) -> Faults:
        with self._lock:
            return self._faults

    def start(self) -> FaultProxy:
        self._spawn(self._accept_loop, "accept")
        return self

    def set(
        self,
        to_server: Mode | str | None = None,
        to_client: Mode | str | None = None,
        *,
        delay_s: float | None = None,
    ) -> None:
        """Change the given directions (the others stay as they are)."""
        with self._lock:
            f = self._faults
            self._faults = Faults(
                Mode(to_server) if to_server is not None else f.to_server,
                Mode(to_client) if to_client is not None else f.to_client,
                f.delay_s if delay_s is None else delay_s,
            )
            faults = self._faults
        if Mode.RESET in (faults.to_server, faults.to_client):
            self._reset_all()
        elif Mode.DROP not in (faults.to_server, faults.to_client):
            self._reset_lossy()

    def heal(self) -> None:
        self.set(Mode.PASS, Mode.PASS)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.close()
        self._reset_all()
        for t in self._threads:
            t.join(2)

    # --- inside -------------------------------------------------------------------------

    def _spawn(self, target: object, name: str, *args: object) -> None:
        t = threading.Thread(target=target, args=args, name=f"faultproxy-{name}",  # type: ignore[arg-type]
                             daemon=True)  # fmt: skip
        t.start()
        self._threads = [x for x in self._threads if x.is_alive()] + [t]

    def _reset_lossy(self) -> None:
        with self._lock:
            lossy, self._lossy = self._lossy, set()
            pairs = [p for p in self._pairs if p[0] in lossy or p[1] in lossy]
        for client, server in pairs:
            _reset(client)
            if server is not None:
                _reset(server)

    def _reset_all(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            _reset(client)
            if server is not None:
                _reset(server)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._connect, "connect", client)

    def _connect(self, client: socket.socket) -> None:
        # Connecting upstream waits while the client side is black-holed: the client's
        # connection attempt hangs, as with a silently lost path.
        while not self._closed.is_set():
            faults = self.faults
            if Mode.RESET in (faults.to_server, faults.to_client):
                _reset(client)
                return
            if faults.to_server is not Mode.BLACK_HOLE and faults.to_client is not Mode.BLACK_HOLE:
                break
            self._closed.wait(POLL_S)
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _reset(client)
            return
        with self._lock:
            self._pairs.append((client, server))
        self._spawn(self._pump, "up", client, server, True)
        self._spawn(self._pump, "down", server, client, False)

    def _pump(self, src: socket.socket, dst: socket.socket, to_server: bool) -> None:
        try:
            while not self._closed.is_set():
                faults = self.faults
                mode = faults.to_server if to_server else faults.to_client
                if mode is Mode.BLACK_HOLE:
                    self._closed.wait(POLL_S)
                    continue
                readable, _, _ = select.select([src], [], [], POLL_S)
                if not readable:
                    continue
                data = src.recv(CHUNK)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                mode = self.faults.to_server if to_server else self.faults.to_client
                if mode is Mode.DROP:
                    with self._lock:
                        self._lossy.add(src)
                    continue
                if mode is Mode.DELAY:
                    self._closed.wait(faults.delay_s)  # the delay is the fault itself
                dst.sendall(data)
        except (OSError, ValueError):
            pass  # reset or closed (a closed socket has no descriptor to select on)
        finally:
            with self._lock:
                self._pairs = [p for p in self._pairs if src not in p]
                self._lossy.discard(src)
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()


class ProxyGroup:
    """One proxy per server of a quorum, for one client: its connect string goes through
    them, and ``set``/``heal`` act on all at once (a client cut off from the ensemble)."""

    def __init__(self, upstreams: list[tuple[str, int]]) -> None:
        self.proxies = [FaultProxy(u) for u in upstreams]

    def start(self) -> ProxyGroup:
        for p in self.proxies:
            p.start()
        return self

    @property
    def connect_string(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in (x.address for x in self.proxies))

    def set(self, to_server: Mode | str | None = None, to_client: Mode | str | None = None) -> None:
        for p in self.proxies:
            p.set(to_server, to_client)

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
