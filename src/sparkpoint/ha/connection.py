"""A kazoo client made from the configuration, and a monitor of its connection state."""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry
from kazoo.security import ACL, make_acl, make_digest_acl

from sparkpoint import metrics
from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha.errors import NotConnectedError
from sparkpoint.ha.paths import ZkPaths

log = logging.getLogger(__name__)


class ConnectionState(enum.StrEnum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost, session may still be alive
    LOST = "lost"  # session expired: ephemeral nodes are gone


Listener = Callable[[ConnectionState], None]


def _security_options(settings: ZooKeeperSettings) -> dict[str, Any]:
    """kazoo's authentication, ACL and TLS arguments from the settings.

    With ``acl: creator`` every znode this client creates may be changed (and read) by
    its own identities only: the digest user, the SASL user, or both.
    """
    options: dict[str, Any] = {}
    acl: list[ACL] = []
    if settings.digest_auth:
        user, _, password = settings.digest_auth.partition(":")
        options["auth_data"] = [("digest", settings.digest_auth)]
        acl.append(make_digest_acl(user, password, all=True))
    if settings.sasl_auth:
        user, _, password = settings.sasl_auth.partition(":")
        options["sasl_options"] = {
            "mechanism": "DIGEST-MD5",
            "username": user,
            "password": password,
        }
        acl.append(make_acl("sasl", user, all=True))
    if settings.acl == "creator" and acl:
        options["default_acl"] = acl
    if settings.ssl_enabled:
        options.update(
            use_ssl=True,
            verify_certs=True,
            check_hostname=True,
            ca=settings.ssl_ca_file,
            certfile=settings.ssl_cert_file or None,
            keyfile=settings.ssl_key_file or None,
        )
    return options


class ZooKeeperConnection:
    """Owns the kazoo client: configuration, retries, ACLs and connection state.

    Listeners run on kazoo's event thread, so they must only set flags or events — never
    block, never call ZooKeeper (kazoo's rule).
    """

    def __init__(self, settings: ZooKeeperSettings) -> None:
        self.settings = settings
        self.paths = ZkPaths(settings.base_path)
        retry = KazooRetry(
            max_tries=settings.max_retry_attempts,
            delay=settings.retry_wait_s,
            backoff=2,
            max_delay=max(settings.retry_wait_s, settings.session_timeout_s / 3),
            deadline=settings.session_timeout_s,
            ignore_expire=False,  # an expired session must surface, never be retried over
        )
        self.client = KazooClient(
            hosts=settings.quorum,
            timeout=settings.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=1.0),
            command_retry=retry,
            **_security_options(settings),
        )
        self._state = ConnectionState.LOST
        self._changed = threading.Condition()
        self._listeners: list[Listener] = []
        self.client.add_listener(self._on_state)

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> ZooKeeperConnection:
        try:
            self.client.start(timeout=self.settings.connection_timeout_s)
        except Exception as exc:
            self.client.stop()
            self.client.close()
            raise NotConnectedError(
                f"cannot connect to ZooKeeper at {self.settings.quorum} within "
                f"{self.settings.connection_timeout_s:g} s: {exc}"
            ) from exc
        self._set(ConnectionState.CONNECTED)
        return self

    def close(self) -> None:
        """Close the session: its ephemeral nodes (latch, leader info) vanish at once."""
        try:
            self.client.stop()
        finally:
            self.client.close()

    def __enter__(self) -> ZooKeeperConnection:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def retry(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run an idempotent call with kazoo's retry policy — but only while connected.

        Kazoo queues a call made while disconnected until the connection is back, which
        during a lost quorum may be never; refusing up front keeps callers responsive.
        """
        self.require_connected()
        return self.client.retry(func, *args, **kwargs)

    def require_connected(self) -> None:
        if self._state is not ConnectionState.CONNECTED:
            raise NotConnectedError(f"ZooKeeper connection is {self._state.value}")

    # --- state --------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return sid[0] if sid else None

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def wait_for(self, state: ConnectionState, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._state is not state:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def _on_state(self, kazoo_state: str) -> None:
        mapped = {
            KazooState.CONNECTED: ConnectionState.CONNECTED,
            KazooState.SUSPENDED: ConnectionState.SUSPENDED,
            KazooState.LOST: ConnectionState.LOST,
        }[kazoo_state]
        self._set(mapped)

    def _set(self, state: ConnectionState) -> None:
        with self._changed:
            self._state = state
            self._changed.notify_all()
        metrics.ZOOKEEPER_CONNECTION_STATE.state(state.value)
        log.info("ZooKeeper connection %s", state.value)
        for listener in list(self._listeners):
            listener(state)
