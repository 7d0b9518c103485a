"""An increment whose reply is lost never leads to an id handed out twice (real ZooKeeper,
the reply dropped by a fault proxy)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from sparkpoint.counter import ZooKeeperCheckpointIDCounter
from sparkpoint.counter.zookeeper import decode_count
from sparkpoint.ha import Fence, FencedError, ZooKeeperConnection, read_epoch
from sparkpoint.ha.fencing import bump_epoch
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.ops.drills.faults import TO_CLIENT, FaultProxy
from tests.support.waiting import wait_until
from tests.support.zk import settings_for


def _in_doubt_increment(zk_server: LocalZooKeeper, *, takeover: bool) -> dict[str, Any]:
    host, _, port = zk_server.connect_string.split(",")[0].rpartition(":")
    outcome: dict[str, Any] = {}
    with FaultProxy(host, int(port)) as proxy:
        settings = settings_for(proxy.connect_string, session_timeout_s=4.0)
        with (
            ZooKeeperConnection(settings) as leader,
            ZooKeeperConnection(
                dataclasses.replace(settings, quorum=zk_server.connect_string)
            ) as other,
        ):
            counter = ZooKeeperCheckpointIDCounter(
                leader, "job-1", Fence(leader, read_epoch(leader))
            )
            counter.start()
            outcome["before"] = [counter.get_and_increment() for _ in range(2)]  # 1, 2

            def value() -> int:
                return decode_count(other.client.get(counter.path)[0], counter.path)

            def increment() -> None:
                try:
                    outcome["issued"] = counter.get_and_increment()
                except Exception as exc:
                    outcome["error"] = exc

            proxy.drop(TO_CLIENT)
            thread = threading.Thread(target=increment, daemon=True)
            thread.start()
            wait_until(lambda: value() == 4, timeout=20, message="increment applied")
            if takeover:
                bump_epoch(other, read_epoch(other), b"{}")
            proxy.reset()
            proxy.heal()
            thread.join(60)
            assert not thread.is_alive()
            successor = ZooKeeperCheckpointIDCounter(
                other, "job-1", Fence(other, read_epoch(other))
            )
            outcome["next"] = successor.get_and_increment()
    return outcome


def test_in_doubt_increment_skips_the_id_never_reuses_it(zk_server: LocalZooKeeper) -> None:
    outcome = _in_doubt_increment(zk_server, takeover=False)
    assert outcome["before"] == [1, 2]
    assert outcome["issued"] == 4  # 3 went out in doubt: skipped
    assert outcome["next"] == 5


def test_in_doubt_increment_then_takeover_issues_nothing_twice(
    zk_server: LocalZooKeeper,
) -> None:
    outcome = _in_doubt_increment(zk_server, takeover=True)
    assert isinstance(outcome["error"], FencedError)  # deposed: no id at all
    assert outcome["next"] == 4  # the successor goes on above the in-doubt 3
