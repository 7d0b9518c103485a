"""The replica process (`sparkpoint coordinator run`): wire configuration, storage, the
election and the REST server together, and stop gracefully.

SIGTERM/SIGINT: leave the election first (the leader deletes leader/info and its latch
node, so the next contender takes over within one election round, not a session timeout),
then stop serving, then close the ZooKeeper session. Exit status 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from sparkpoint import metrics
from sparkpoint.config import Config, ConfigError
from sparkpoint.ha import (
    EmbeddedLeaderElection,
    LeaderElection,
    Leadership,
    ZooKeeperConnection,
    ZooKeeperLeaderElection,
)
from sparkpoint.service.api import create_app
from sparkpoint.service.api.auth import Authenticator, TokenFileError
from sparkpoint.service.backend import EmbeddedBackend, ZooKeeperBackend
from sparkpoint.service.replica import Replica
from sparkpoint.storage import CheckpointStorage

log = logging.getLogger("sparkpoint.service")


def advertised_address(config: Config, port: int) -> str:
    if config.rest.address:
        return config.rest.address.rstrip("/")
    scheme = "https" if config.security.ssl_enabled else "http"
    host = config.rest.bind_address
    if host in {"0.0.0.0", "::", ""}:
        host = socket.gethostname()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


class _EmbeddedListener:
    """Keeps the embedded backend's view of the leadership in step with the replica's."""

    def __init__(self, backend: EmbeddedBackend, replica: Replica) -> None:
        self._backend = backend
        self._replica = replica

    def leadership_granted(self, leadership: Leadership) -> None:
        self._backend.leadership = leadership
        metrics.IS_LEADER.set(1)  # the ZooKeeper election records these itself
        metrics.LEADER_EPOCH.set(leadership.epoch)
        metrics.LEADER_CHANGES.inc()
        self._replica.leadership_granted(leadership)

    def leadership_revoked(self, leadership: Leadership, reason: str) -> None:
        self._backend.leadership = None
        metrics.IS_LEADER.set(0)
        metrics.LEADER_CHANGES.inc()
        self._replica.leadership_revoked(leadership, reason)


@dataclass
class Service:
    """A started replica and its server; :meth:`stop` undoes :func:`start_service`."""

    replica: Replica
    server: uvicorn.Server
    thread: threading.Thread
    conn: ZooKeeperConnection | None
    address: str
    _stopped: bool = field(default=False)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.replica.stop()  # releases leadership first: the quickest handover
        self.server.should_exit = True
        self.thread.join(10)
        if self.conn is not None:
            self.conn.close()


def _tls_options(config: Config) -> dict[str, Any]:
    """uvicorn's TLS settings from ``security.ssl.rest.*`` (none when TLS is off)."""
    sec = config.security
    if not sec.ssl_enabled:
        return {}
    options: dict[str, Any] = {"ssl_certfile": sec.ssl_cert_file, "ssl_keyfile": sec.ssl_key_file}
    if sec.ssl_ca_file:
        options["ssl_ca_certs"] = sec.ssl_ca_file
    if sec.ssl_client_auth:
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return options


def _check_security(config: Config) -> None:
    """Refuse to start with an unreadable token file; say loudly when auth is off."""
    try:
        Authenticator.from_settings(config.security)
    except TokenFileError as exc:
        raise ConfigError("rest.auth.token-file", config.security.token_file, str(exc)) from None
    if not config.security.auth_enabled:
        log.warning(
            "REST authentication is OFF (rest.auth.enabled=false): anyone who can reach "
            "this port may call every endpoint; use this for local work only"
        )


def start_service(config: Config) -> Service:
    _check_security(config)
    instance_id = config.ha.instance_id or f"{socket.gethostname()}-{os.getpid()}"
    family = socket.AF_INET6 if ":" in config.rest.bind_address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it, a reply written in two parts (head,
    # then body) waits for the client's delayed ACK — about 40 ms on every request.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((config.rest.bind_address, config.rest.port))
    # Listening before the election starts: followers take a refused connection to a
    # leader's address for a dead process (ha.lease.leader_process_gone).
    sock.listen(2048)
    address = advertised_address(config, sock.getsockname()[1])
    storage = CheckpointStorage(
        config.storage.checkpoints_dir, savepoint_dir=config.storage.savepoints_dir or None
    )
    conn: ZooKeeperConnection | None = None
    election_factory: Callable[[Replica], LeaderElection]
    if config.ha.type == "none":
        embedded = EmbeddedBackend(address, instance_id)
        replica = Replica(
            config, backend=embedded, storage=storage, address=address, instance_id=instance_id
        )

        def election_factory(r: Replica) -> LeaderElection:
            return EmbeddedLeaderElection(instance_id, listener=_EmbeddedListener(embedded, r))
    else:
        conn = ZooKeeperConnection(config.zookeeper).start()
        zk_conn = conn
        replica = Replica(
            config,
            backend=ZooKeeperBackend(conn),
            storage=storage,
            address=address,
            instance_id=instance_id,
        )

        def election_factory(r: Replica) -> LeaderElection:
            return ZooKeeperLeaderElection(
                zk_conn,
                instance_id=instance_id,
                address=address,
                listener=r,  # lease renewal and takeover follow config.zookeeper
            )

    server = uvicorn.Server(
        uvicorn.Config(
            create_app(replica),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
            **_tls_options(config),
        )
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="sparkpoint-rest", daemon=True
    )
    thread.start()
    replica.start(election_factory)
    log.info("%s serving at %s (%s mode)", instance_id, address, config.ha.type)
    return Service(replica, server, thread, conn, address)


def run(config: Config) -> int:
    """Run until SIGTERM or SIGINT; returns the exit status."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    service = start_service(config)
    while not stop.wait(0.5):
        if not service.thread.is_alive():
            log.error("the REST server stopped unexpectedly")
            service.stop()
            return 1
    log.info("stopping: releasing leadership")
    service.stop()
    return 0
