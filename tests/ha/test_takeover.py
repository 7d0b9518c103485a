"""A lease takeover checks the lease it judged: one transaction of check(leader/info,
version seen) and set(leader/epoch, epoch seen). Real ZooKeeper; the race is staged
deterministically — the test is the follower, the renewal is the leader's own fenced write."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from sparkpoint.ha import (
    ConflictError,
    ContenderState,
    FencedError,
    LeaderInfo,
    Op,
    ZooKeeperConnection,
    ZooKeeperLeaderElection,
    read_epoch,
)
from sparkpoint.ha.lease import LeaseView, LeaseWatch, take_over
from tests.support.waiting import wait_until

# No real follower takes over within a test; the leader's own renewals (every RENEW) may
# land anywhere, which only ever makes a takeover fail, so the positive case looks again.
RENEW = 1.0
TAKEOVER = 30.0


def _nothing(*_: object) -> None:
    """No wake-ups needed: the test looks when it wants to."""


@pytest.fixture
def leader(connect) -> Iterator[ZooKeeperLeaderElection]:
    election = ZooKeeperLeaderElection(
        connect(), instance_id="old", renew_interval_s=RENEW, takeover_timeout_s=TAKEOVER
    )
    election.start()
    wait_until(lambda: election.state is ContenderState.LEADER, timeout=15, message="leader")
    yield election
    election.stop()


def _renew(election: ZooKeeperLeaderElection) -> None:
    """A real renewal: the leader's fenced write of leader/info with one more renewal."""
    lead = election.leadership
    assert lead is not None
    path = election.conn.paths.leader_info
    info = LeaderInfo.from_bytes(election.conn.client.get(path)[0])
    assert info is not None
    renewed = dataclasses.replace(info, renewals=info.renewals + 1)
    lead.fence.commit([Op.set(path, renewed.to_bytes())], "renewing leader info")


def _payload() -> bytes:
    return json.dumps({"instance_id": "new"}).encode()


def _look(conn: ZooKeeperConnection) -> LeaseView:
    return LeaseWatch(TAKEOVER, RENEW).look(conn, _nothing)


def test_a_renewal_between_look_and_takeover_refuses_the_takeover(
    leader: ZooKeeperLeaderElection, connect
) -> None:
    follower = connect()
    lead = leader.leadership
    assert lead is not None
    seen = _look(follower)
    assert seen.leader_id == "old" and seen.epoch == lead.epoch
    _renew(leader)  # lands between the follower's look and its takeover
    with pytest.raises(ConflictError, match="refused"):
        take_over(follower, seen, _payload(), b"")
    assert read_epoch(follower) == lead.epoch  # the renewed leader keeps its epoch
    lead.fence.commit([], "confirming leadership")  # and may still write
    assert not lead.fence.is_fenced and leader.state is ContenderState.LEADER


def test_a_takeover_of_the_lease_it_judged_deposes_the_leader(
    leader: ZooKeeperLeaderElection, connect
) -> None:
    follower = connect()
    lead = leader.leadership
    assert lead is not None

    def attempt() -> int | None:
        try:
            return take_over(follower, _look(follower), _payload(), b"")
        except ConflictError:
            return None  # the leader's own renewal landed in between: look again

    assert wait_until(attempt, timeout=20, message="takeover") == lead.epoch + 1
    with pytest.raises(FencedError):
        lead.fence.commit([], "confirming leadership")
    wait_until(lead.revoked.is_set, timeout=10, message="the old leader stepped down")


def test_takeover_without_leader_info_refused_if_a_leader_publishes_meanwhile(
    zk_conn: ZooKeeperConnection, connect
) -> None:
    follower = connect()
    read_epoch(follower)  # the epoch exists; nobody leads, no leader/info
    seen = _look(follower)
    assert seen.info_version is None and seen.leader_id is None
    path = zk_conn.paths.leader_info
    zk_conn.client.create(path, b"published meanwhile", ephemeral=True)
    with pytest.raises(ConflictError, match="NodeExistsError"):
        take_over(follower, seen, _payload(), b"ours")
    assert read_epoch(follower) == seen.epoch
    assert zk_conn.client.get(path)[0] == b"published meanwhile"

    zk_conn.client.delete(path)
    seen = _look(follower)
    assert seen.epoch is not None
    assert take_over(follower, seen, _payload(), b"ours") == seen.epoch + 1
    data, stat = follower.client.get(path)
    assert data == b"ours" and stat.ephemeralOwner == follower.session_id


def test_no_leader_waits_out_a_live_epoch_holder() -> None:
    watch = LeaseWatch(2.0, 0.5)
    view = dataclasses.replace(watch.observe(None, 7, 0.0), silent_for=0.5)
    # Nobody published for epoch 7; its holder is gone: go after a moment.
    assert watch.may_take_over(view, 0, holder_queued=False)
    # Its holder is still queued: it may be about to publish, with a lease counted from
    # before its bump, so it gets the whole takeover timeout.
    assert not watch.may_take_over(view, 0, holder_queued=True)
    assert watch.may_take_over(dataclasses.replace(view, silent_for=2.0), 0, holder_queued=True)
