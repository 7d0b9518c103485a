"""Leader election among in-process contenders, each with its own ZooKeeper session."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from sparkpoint.ha import (
    ContenderState,
    Leadership,
    ZooKeeperConnection,
    ZooKeeperLeaderElection,
    list_contenders,
    read_epoch,
    read_leader,
)
from sparkpoint.ha.fencing import bump_epoch
from tests.support.waiting import wait_until
from tests.support.zk import expire_session


class Recorder:
    """A LeadershipListener that remembers what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str]] = []

    def leadership_granted(self, leadership: Leadership) -> None:
        self.events.append(("granted", leadership.epoch, ""))

    def leadership_revoked(self, leadership: Leadership, reason: str) -> None:
        self.events.append(("revoked", leadership.epoch, reason))


Contenders = Callable[[int], list[tuple[ZooKeeperLeaderElection, Recorder]]]


@pytest.fixture
def contenders(connect) -> Iterator[Contenders]:
    started: list[ZooKeeperLeaderElection] = []

    def make(n: int) -> list[tuple[ZooKeeperLeaderElection, Recorder]]:
        out = []
        for _ in range(n):
            recorder = Recorder()
            election = ZooKeeperLeaderElection(
                connect(),
                instance_id=f"c{len(started)}",
                address=f"127.0.0.1:{9000 + len(started)}",
                listener=recorder,
                renew_interval_s=0.1,
            )
            election.start()
            started.append(election)
            out.append((election, recorder))
        return out

    yield make
    for election in started:
        election.stop()


def leaders(group: list[tuple[ZooKeeperLeaderElection, Recorder]]) -> list[ZooKeeperLeaderElection]:
    return [e for e, _ in group if e.state is ContenderState.LEADER]


def the_leader(group: list[tuple[ZooKeeperLeaderElection, Recorder]]) -> ZooKeeperLeaderElection:
    found = wait_until(
        lambda: len(leaders(group)) == 1 and leaders(group),
        timeout=15,
        message="exactly one leader",
    )
    return found[0]


def test_exactly_one_leader_publishes_info(
    contenders: Contenders, zk_conn: ZooKeeperConnection
) -> None:
    group = contenders(3)
    leader = the_leader(group)
    lead = leader.leadership
    assert lead is not None and lead.can_act()
    info = wait_until(lambda: read_leader(zk_conn), timeout=5, message="leader info")
    assert info.instance_id == leader.instance_id
    assert info.address == leader.address
    assert info.epoch == lead.epoch == read_epoch(zk_conn)
    assert list_contenders(zk_conn)[0].instance_id == leader.instance_id
    assert len(list_contenders(zk_conn)) == 3
    # Renewals are fenced writes that keep happening while it leads.
    first = info.renewals
    wait_until(
        lambda: (i := read_leader(zk_conn)) is not None and i.renewals > first + 2,
        timeout=5,
        message="lease renewals",
    )


def test_graceful_stop_hands_over_with_a_higher_epoch(
    contenders: Contenders, zk_conn: ZooKeeperConnection
) -> None:
    group = contenders(2)
    first = the_leader(group)
    first_epoch = first.leadership.epoch  # type: ignore[union-attr]
    first.stop()
    rest = [(e, r) for e, r in group if e is not first]
    second = the_leader(rest)
    assert second.leadership.epoch > first_epoch  # type: ignore[union-attr]
    info = wait_until(
        lambda: (
            (i := read_leader(zk_conn)) is not None and i.instance_id == second.instance_id and i
        ),
        timeout=5,
        message="new leader info",
    )
    assert info.epoch == second.leadership.epoch  # type: ignore[union-attr]


def test_session_expiry_moves_leadership_and_old_leader_contends_again(
    contenders: Contenders, zk_conn: ZooKeeperConnection
) -> None:
    group = contenders(2)
    old = the_leader(group)
    old_lead = old.leadership
    assert old_lead is not None
    recorder = dict((id(e), r) for e, r in group)[id(old)]
    expire_session(old.conn)

    wait_until(old_lead.revoked.is_set, timeout=10, message="old leader revoked")
    assert not old_lead.can_act()
    # Whether the successor had bumped the epoch before the old leader checked is a race
    # here (the zombie process test pins the fenced case down).
    reason = old_lead.revoke_reason or ""
    assert reason.startswith("fenced") or reason.startswith("ZooKeeper session lost"), reason
    new = the_leader(group)
    assert new is not old
    assert new.leadership.epoch > old_lead.epoch  # type: ignore[union-attr]
    # The old leader queues again, with a node of its new session.
    wait_until(
        lambda: old.instance_id in [c.instance_id for c in list_contenders(zk_conn)],
        timeout=10,
        message="old leader back in the queue",
    )
    assert recorder.events[0][0] == "granted" and recorder.events[1][0] == "revoked"


def test_leader_whose_epoch_was_taken_is_fenced_steps_down_and_requeues(
    contenders: Contenders, zk_conn: ZooKeeperConnection
) -> None:
    ((election, recorder),) = contenders(1)
    leader = the_leader([(election, recorder)])
    lead = leader.leadership
    assert lead is not None
    node_before = leader.status()["latch_node"]

    # Someone else takes the epoch (what a lease takeover does): the next renewal is fenced.
    _, stat = zk_conn.client.get(zk_conn.paths.epoch)
    bump_epoch(zk_conn, stat.version, json.dumps({"instance_id": "usurper"}).encode())

    wait_until(lead.revoked.is_set, timeout=10, message="fenced leader revoked")
    assert lead.revoke_reason is not None and lead.revoke_reason.startswith("fenced")
    assert lead.fence.is_fenced
    # It contends again with a new node and, being alone, wins a newer epoch.
    relead = wait_until(
        lambda: (term := leader.leadership) is not None and term is not lead and term,
        timeout=10,
        message="re-elected with a new term",
    )
    assert relead.epoch == stat.version + 2
    assert leader.status()["latch_node"] != node_before
    # The term is visible a moment before the listener hears of it.
    wait_until(lambda: len(recorder.events) == 3, timeout=10, message="the new term's grant heard")
    assert [kind for kind, _, _ in recorder.events] == ["granted", "revoked", "granted"]
