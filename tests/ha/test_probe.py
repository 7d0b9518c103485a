"""A leader whose process is gone while its host stays up is taken over without waiting
out the lease: the first follower finds its advertised address refusing connections.
Real ZooKeeper; the leader's "process" here is a listening socket the test closes, so
the leader itself stays alive — a wrong guess, which the fence makes harmless."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator

import pytest

from sparkpoint.ha import ContenderState, LeaderInfo, ZooKeeperConnection, ZooKeeperLeaderElection
from sparkpoint.ha.lease import LeaseView, leader_process_gone
from tests.support.waiting import wait_until

RENEW = 0.2
TAKEOVER = 60.0  # far beyond every deadline below: only the probe can explain a takeover
LOOPBACK = "http://127.0.0.1:1"  # a follower's own address on the same host


@pytest.fixture
def contender(connect) -> Iterator[Callable[[str, str], ZooKeeperLeaderElection]]:
    """Start a contender with the test's lease timing on a connection of its own."""
    started: list[ZooKeeperLeaderElection] = []

    def start(instance_id: str, address: str) -> ZooKeeperLeaderElection:
        election = ZooKeeperLeaderElection(
            connect(), instance_id=instance_id, address=address,
            renew_interval_s=RENEW, takeover_timeout_s=TAKEOVER,
        )  # fmt: skip
        started.append(election)
        election.start()
        return election

    yield start
    for election in started:
        election.stop()


def _renewals(conn: ZooKeeperConnection) -> int:
    info = LeaderInfo.from_bytes(conn.client.get(conn.paths.leader_info)[0])
    assert info is not None
    return info.renewals


def test_follower_takes_over_at_once_when_the_leaders_address_refuses(connect, contender) -> None:
    serving = socket.create_server(("127.0.0.1", 0))
    try:
        port = serving.getsockname()[1]
        old = contender("old", f"http://127.0.0.1:{port}")
        wait_until(lambda: old.state is ContenderState.LEADER, timeout=15, message="leader")
        new = contender("new", "http://127.0.0.1:1")
        observer = connect()
        # While the address accepts connections, the follower probes and waits.
        start = _renewals(observer)
        wait_until(lambda: _renewals(observer) >= start + 5, timeout=30, message="renewals")
        assert new.state is ContenderState.FOLLOWER and old.state is ContenderState.LEADER
    finally:
        serving.close()  # the "process" is gone: its port now refuses
    lead = old.leadership
    assert lead is not None
    wait_until(
        lambda: new.state is ContenderState.LEADER, timeout=20, message="probe-driven takeover"
    )
    assert new.leadership is not None and new.leadership.epoch == lead.epoch + 1
    # The old leader was alive after all: its next renewal is fenced and it steps down.
    wait_until(lead.revoked.is_set, timeout=20, message="old leader fenced")
    assert lead.revoke_reason is not None and lead.revoke_reason.startswith("fenced")


@pytest.mark.parametrize(
    ("address", "renewals", "own"),
    [
        ("pid:4242", 3, LOOPBACK),  # not an address
        ("http://some-host.invalid:1", 3, LOOPBACK),  # a name: never looked up from here
        ("http://127.0.0.1:{port}", 0, LOOPBACK),  # not renewed yet: may not serve yet
        ("http://127.0.0.1:{port}", 3, "http://10.213.1.2:80"),  # someone else's loopback
        ("http://127.0.0.1:{port}", 3, ""),  # we cannot tell whose loopback it is
    ],
)
def test_probe_concludes_nothing_it_cannot_know(address: str, renewals: int, own: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as spare:
        port = spare.getsockname()[1]
    view = LeaseView(
        epoch=3, leader_id="old", silent_for=0.0, live=True,
        leader_address=address.format(port=port), leader_renewals=renewals,
    )  # fmt: skip
    assert not leader_process_gone(view, 0.2, own)


def test_probe_sees_a_refusal_and_a_listener() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        view = LeaseView(
            epoch=3, leader_id="old", silent_for=0.0, live=True,
            leader_address=f"http://127.0.0.1:{port}", leader_renewals=1,
        )  # fmt: skip
        assert not leader_process_gone(view, 0.2, LOOPBACK)
    assert leader_process_gone(view, 0.2, LOOPBACK)


def test_a_restarted_replicas_old_node_does_not_hold_the_first_place(connect, contender) -> None:
    # A replica killed and restarted queues again while its old node waits for its dead
    # session to expire (up to the session timeout). Ahead of every live follower in line,
    # that old node must not keep them from probing the leader.
    serving = socket.create_server(("127.0.0.1", 0))
    try:
        port = serving.getsockname()[1]
        old = contender("old", f"http://127.0.0.1:{port}")
        wait_until(lambda: old.state is ContenderState.LEADER, timeout=15, message="leader")
        # The restarted replica's previous node: first in line, its session still alive.
        ghost = connect()
        data = json.dumps({"instance_id": "restarted", "address": LOOPBACK}).encode()
        ghost.client.create(f"{ghost.paths.latch}/c_ghost_", data, ephemeral=True, sequence=True)
        follower = contender("follower", LOOPBACK)
        contender("restarted", LOOPBACK)  # queued again after its "restart"
        observer = connect()
        start = _renewals(observer)
        wait_until(lambda: _renewals(observer) >= start + 3, timeout=30, message="renewals")
    finally:
        serving.close()  # the leader's process is gone
    wait_until(
        lambda: follower.state is ContenderState.LEADER, timeout=20,
        message="the first live follower in line takes over by the probe",
    )  # fmt: skip
