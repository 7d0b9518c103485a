"""The driver's side of the leader's liveness probe (``sparkpoint.service.driver_probe``).

A driver registering with the service opens a listening socket and gives its address.
The socket lives exactly as long as the process: while it lives, the kernel accepts every
probe (even while the process is frozen); once the process is gone, the port refuses, and
the leader grants the job's standby without waiting out the driver takeover timeout.
Accepted connections are closed at once; nothing is ever read or sent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading

log = logging.getLogger(__name__)

#: Overrides the host the driver advertises (and binds): set it where the address the
#: coordinators see differs from the one routing picks, e.g. behind NAT.
HOST_ENV = "SPARKPOINT_DRIVER_HOST"


def local_host_towards(address: str) -> str:
    """This machine's address on the route to ``host:port`` (no packet is sent: a UDP
    socket's connect only picks the route)."""
    host, _, port = address.removeprefix("http://").removeprefix("https://").rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        family = socket.getaddrinfo(host, int(port or 0), type=socket.SOCK_DGRAM)[0][0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port or 9)))
            return str(s.getsockname()[0])
    except (OSError, ValueError):
        return "127.0.0.1"


class LivenessListener:
    """A listening socket on an ephemeral port of ``host``; :attr:`address` to register."""

    def __init__(self, host: str) -> None:
        self._sock = socket.create_server((host, 0), family=_family(host), backlog=64)
        port = self._sock.getsockname()[1]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        #: Probes answered so far.
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, name="sparkpoint-liveness",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    @classmethod
    def towards(cls, coordinator: str) -> LivenessListener | None:
        """A listener on the address the coordinator can reach (None when it cannot be
        opened: the driver then runs without probes, on the takeover timeout alone)."""
        host = os.environ.get(HOST_ENV) or local_host_towards(coordinator)
        try:
            return cls(host)
        except OSError as exc:
            log.warning("no liveness listener on %s (%s): takeover by timeout only", host, exc)
            return None

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            conn.close()
            self.accepted += 1

    def close(self) -> None:
        # shutdown first: a bare close leaves the socket listening while the accept
        # thread is blocked in it (the call holds its own reference).
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        self._thread.join(2)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
