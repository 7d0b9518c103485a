"""The fault proxy itself, between a real kazoo client and a real ZooKeeper server."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from kazoo.exceptions import ConnectionLoss

from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ha.connection import ConnectionState
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.ops.drills.faults import BOTH, TO_CLIENT, TO_SERVER, FaultProxy
from tests.support.waiting import wait_until
from tests.support.zk import settings_for


@pytest.fixture
def proxy(zk_server: LocalZooKeeper) -> Iterator[FaultProxy]:
    host, _, port = zk_server.connect_string.split(",")[0].rpartition(":")
    with FaultProxy(host, int(port)) as proxy:
        yield proxy


@pytest.fixture
def through(proxy: FaultProxy) -> Iterator[ZooKeeperConnection]:
    """A connection whose every byte goes through the proxy."""
    conn = ZooKeeperConnection(settings_for(proxy.connect_string, session_timeout_s=4.0)).start()
    yield conn
    conn.close()


@pytest.fixture
def direct(zk_server: LocalZooKeeper) -> Iterator[ZooKeeperConnection]:
    conn = ZooKeeperConnection(settings_for(zk_server.connect_string)).start()
    yield conn
    conn.close()


def _path(conn: ZooKeeperConnection, name: str) -> str:
    return f"/faultproxy-{conn.settings.cluster_id}-{name}"


def test_passes_both_ways(
    proxy: FaultProxy, through: ZooKeeperConnection, direct: ZooKeeperConnection
) -> None:
    path = _path(through, "pass")
    through.client.create(path, b"x")
    assert direct.client.get(path)[0] == b"x"
    assert proxy.forwarded[TO_SERVER] > 0
    assert proxy.forwarded[TO_CLIENT] > 0
    assert proxy.open_connections == 1


def test_drop_delivers_the_request_and_swallows_the_reply(
    proxy: FaultProxy, through: ZooKeeperConnection, direct: ZooKeeperConnection
) -> None:
    path = _path(through, "drop")
    proxy.drop(TO_CLIENT)
    pending = through.client.create_async(path, b"applied")
    wait_until(
        lambda: direct.client.exists(path),
        timeout=10,
        message="the request reached the server and was applied",
    )
    wait_until(lambda: proxy.dropped[TO_CLIENT] > 0, timeout=10, message="the reply dropped")
    assert not pending.ready()  # applied on the server, never answered
    proxy.reset()
    with pytest.raises(ConnectionLoss):
        pending.get(timeout=10)
    proxy.heal()
    assert through.wait_for(ConnectionState.CONNECTED, 20)
    assert through.client.get(path)[0] == b"applied"


def test_black_hole_holds_bytes_until_healed(
    proxy: FaultProxy, through: ZooKeeperConnection, direct: ZooKeeperConnection
) -> None:
    path = _path(through, "hole")
    proxy.black_hole(BOTH)
    pending = through.client.create_async(path, b"late")
    assert proxy.open_connections == 1  # the connection stays open
    proxy.heal()
    assert pending.get(timeout=10) == path
    assert direct.client.get(path)[0] == b"late"


def test_reset_breaks_existing_and_refuses_new_connections(
    proxy: FaultProxy, through: ZooKeeperConnection
) -> None:
    proxy.reset()
    assert through.wait_for(ConnectionState.SUSPENDED, 10)
    wait_until(lambda: proxy.open_connections == 0, timeout=10, message="links closed")
    accepted = proxy.accepted
    # Refused: the proxy resets each new connection as soon as it has accepted it.
    with (
        pytest.raises(ConnectionResetError),
        socket.create_connection(proxy.address, timeout=5) as raw,
    ):
        raw.recv(16)
    assert proxy.accepted == accepted
    proxy.heal()
    assert through.wait_for(ConnectionState.CONNECTED, 20)
    assert through.client.exists("/") is not None


def test_delay_still_delivers(proxy: FaultProxy, through: ZooKeeperConnection) -> None:
    proxy.delay(0.2, TO_CLIENT)
    path = _path(through, "delay")
    through.client.create(path, b"slow")
    assert through.client.get(path)[0] == b"slow"


def test_bad_direction_or_delay_is_refused(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="direction must be"):
        proxy.drop("sideways")
    with pytest.raises(ValueError, match="delay must be >= 0"):
        proxy.delay(-1)
    assert proxy.fault(TO_CLIENT).kind == "pass"
