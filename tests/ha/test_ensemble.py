"""A real 3-server ensemble: losing one server is survivable, losing the quorum is not."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from kazoo.exceptions import KazooException

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import (
    ContenderState,
    HAError,
    Op,
    ZooKeeperConnection,
    ZooKeeperLeaderElection,
    ZooKeeperLeadership,
)
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.support.waiting import wait_until
from tests.support.zk import settings_for

SESSION_TIMEOUT = 2.0


@pytest.fixture
def settings(zk_ensemble: LocalZooKeeper) -> ZooKeeperSettings:
    return settings_for(zk_ensemble.connect_string, session_timeout_s=SESSION_TIMEOUT)


@pytest.fixture
def elections(settings: ZooKeeperSettings) -> Iterator[list[ZooKeeperLeaderElection]]:
    group = [
        ZooKeeperLeaderElection(
            ZooKeeperConnection(settings).start(), instance_id=f"c{i}", renew_interval_s=0.1
        )
        for i in range(2)
    ]
    for election in group:
        election.start()
    yield group
    for election in group:
        election.stop()
        election.conn.close()


def one_leader(group: list[ZooKeeperLeaderElection]) -> ZooKeeperLeadership:
    def find() -> ZooKeeperLeadership | None:
        leading = [e.leadership for e in group if e.state is ContenderState.LEADER]
        live = [lead for lead in leading if lead is not None and lead.can_act()]
        return live[0] if len(leading) == 1 and live else None

    return wait_until(find, timeout=30, message="exactly one acting leader")


def write_succeeds(lead: ZooKeeperLeadership, conn: ZooKeeperConnection, value: bytes) -> bool:
    path = f"{conn.paths.base}/probe"
    try:
        # Bounded: a read sent just as the quorum goes waits in kazoo's queue for the
        # connection to come back (never, while the test holds the quorum down).
        conn.require_connected()
        exists = conn.client.exists_async(path).get(timeout=2 * SESSION_TIMEOUT) is not None
        lead.fence.commit([Op.set(path, value) if exists else Op.create(path, value)], "probe")
    except (HAError, KazooException, conn.client.handler.timeout_exception):
        return False
    return True


@pytest.mark.slow
def test_one_server_down_then_quorum_lost_then_back(
    zk_ensemble: LocalZooKeeper,
    elections: list[ZooKeeperLeaderElection],
    settings: ZooKeeperSettings,
) -> None:
    observer = ZooKeeperConnection(settings).start()
    try:
        lead = one_leader(elections)
        assert write_succeeds(lead, observer, b"all three up")

        # One of three down: still a quorum, so leadership and writes go on.
        zk_ensemble.stop_server(1, signal.SIGKILL)
        lead = one_leader(elections)
        wait_until(
            lambda: write_succeeds(one_leader(elections), observer, b"two of three"),
            timeout=30,
            message="a fenced write with two servers of three",
        )

        # Quorum lost: the leader must stop acting within its session timeout (plus the
        # time kazoo needs to notice), and nothing can be written.
        zk_ensemble.stop_server(2, signal.SIGKILL)
        wait_until(
            lambda: not lead.can_act(),
            timeout=SESSION_TIMEOUT + 2.0,
            message="leader stops acting after losing the quorum",
        )
        assert not write_succeeds(lead, observer, b"no quorum")
        assert all(not (e.leadership and e.leadership.can_act()) for e in elections)

        # Quorum back: exactly one leader again, and writes work.
        zk_ensemble.start_server(1)
        zk_ensemble.start_server(2)
        zk_ensemble.wait_serving(timeout=60)
        wait_until(lambda: observer.state.value == "connected", timeout=30, message="observer back")
        new = one_leader(elections)
        wait_until(
            lambda: write_succeeds(one_leader(elections), observer, b"back"),
            timeout=30,
            message="writes after the quorum is back",
        )
        # ZooKeeper reads are only as fresh as the server answering them: sync first.
        probe = f"{observer.paths.base}/probe"
        observer.retry(observer.client.sync, probe)
        assert observer.retry(observer.client.get, probe)[0] == b"back"
        assert new.epoch >= lead.epoch
    finally:
        observer.close()
