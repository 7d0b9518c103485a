"""Helpers around real ZooKeeper servers for the tests."""

from __future__ import annotations

import uuid

from kazoo.client import KazooClient

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import ZooKeeperConnection


def settings_for(
    connect_string: str,
    *,
    session_timeout_s: float = 2.0,
    takeover_timeout_s: float = 0.0,
    **kw: object,
) -> ZooKeeperSettings:
    """Settings for a fresh, isolated cluster id on ``connect_string``; no lease unless a
    takeover timeout is given (so failover waits for session expiry)."""
    return ZooKeeperSettings(
        quorum=connect_string,
        cluster_id=f"t-{uuid.uuid4().hex[:12]}",
        session_timeout_s=session_timeout_s,
        takeover_timeout_s=takeover_timeout_s,
        connection_timeout_s=10.0,
        retry_wait_s=0.05,
        **kw,  # type: ignore[arg-type]
    )


def expire_session(conn: ZooKeeperConnection) -> None:
    """Expire ``conn``'s session for real, as kazoo's own test harness does: a second client
    joins the same session and closes it, so the server ends the session."""
    session_id, password = conn.client.client_id
    other = KazooClient(hosts=conn.settings.quorum, client_id=(session_id, password))
    other.start(timeout=10)
    other.stop()
    other.close()
