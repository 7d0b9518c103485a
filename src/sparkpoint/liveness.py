"""Is a process still listening at ``host:port``? One TCP connect, and when to trust it.

Used by a follower probing the leader (``ha.lease``) and by the leader probing a silent
driver (``service.driver_probe``), so both follow one rule:

- Only a *refused* connection says the process is gone (its host answered, nothing
  listens there). Accepted proves nothing either way (a frozen process's kernel still
  accepts), nor does silence (the host or the path may be gone).
- A loopback address is probed only by a prober that is itself on loopback (its own
  advertised address is a loopback one): a process that advertised ``127.0.0.1:P`` —
  reached through a port-forward, a tunnel or a published container port — is on
  *another* host's or namespace's loopback, where a refusal says nothing about it.
- A name is looked up only where the caller allows it (never on the election thread).
"""

from __future__ import annotations

import enum
import ipaddress
import socket
from urllib.parse import urlsplit


class Liveness(enum.Enum):
    ALIVE = "alive"  # something accepted the connection
    GONE = "gone"  # refused: nothing listens there any more
    UNKNOWN = "unknown"  # no answer, not resolvable, or not ours to judge (loopback)


def probe(address: str, timeout_s: float, *, own_address: str, resolve: bool = False) -> Liveness:
    """Connect to ``address`` (``host:port`` or a URL) once, under the rules above.
    ``own_address``: where the prober itself is reached; ``resolve``: look names up."""
    target = _target(address, resolve=resolve)
    if target is None:
        return Liveness.UNKNOWN
    if is_loopback(target[0]) and not _on_loopback(own_address):
        return Liveness.UNKNOWN
    try:
        with socket.create_connection(target, timeout=timeout_s):
            return Liveness.ALIVE
    except ConnectionRefusedError:
        return Liveness.GONE
    except OSError:
        return Liveness.UNKNOWN


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _on_loopback(own_address: str) -> bool:
    own = _target(own_address, resolve=False)
    return own is not None and is_loopback(own[0])


def _target(address: str, *, resolve: bool) -> tuple[str, int] | None:
    """``(ip, port)`` to connect to; None when the address gives none."""
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or port is None or not 0 < port < 65536:
        return None
    if host == "localhost" or _is_ip(host):
        return host, port
    if not resolve:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None
    return (str(infos[0][4][0]), port) if infos else None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
