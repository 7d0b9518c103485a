"""Failover by lease between real replica processes whose sessions outlive the pause.

With a 30 s session nothing but the lease can move leadership within the test: a leader
paused for three takeover timeouts still has its session when it wakes, yet it has lost
its lease — it must complete and notify nothing, and late acknowledgements reaching it
must change nothing.
"""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from sparkpoint.ha import read_leader
from tests.support.waiting import wait_until

from .support import Driver, empty_acks, make_graph, wait_leader
from .test_failover import JOB, assert_history_sound, stored_ids

TAKEOVER_S = 1.0  # the replicas' lease takeover timeout (tests/service/support.py)
SESSION = "30 s"


@pytest.mark.slow
def test_zombie_past_its_lease_completes_and_notifies_nothing(replicas, observer) -> None:
    procs = [replicas(f"l{i}", session_timeout=SESSION) for i in range(2)]
    zombie = wait_leader(procs)
    driver = Driver([p.address for p in procs], make_graph(JOB)).start()
    try:
        wait_until(lambda: len(driver.completed) >= 2, timeout=30, message="2 checkpoints")
        driver.acking.clear()  # keep the next trigger's acknowledgements back
        held = wait_until(lambda: list(driver.held), timeout=10, message="a held trigger")
        zombie_epoch, held_id = held[0]

        paused = time.monotonic()
        zombie.signal(signal.SIGSTOP)
        survivor = next(p for p in procs if p is not zombie)
        wait_until(
            lambda: (
                (info := read_leader(observer)) is not None and info.instance_id == survivor.name
            ),
            timeout=15,  # half the session: only the lease can have moved it
            message="the other replica takes over by lease",
        )
        driver.acking.set()
        wait_until(
            lambda: any(e > zombie_epoch for e, _ in driver.completed),
            timeout=30,
            message="the new leader completes a checkpoint",
        )
        # The pause under test lasts three takeover timeouts in all.
        time.sleep(max(0.0, paused + 3 * TAKEOVER_S - time.monotonic()))
        before = stored_ids(observer)

        zombie.signal(signal.SIGCONT)
        acks = empty_acks(driver.graph, driver.run_id)
        # Straight to the zombie, the moment it wakes: its lease lapsed, so it refuses.
        late = httpx.post(
            f"{zombie.address}/v1/jobs/{JOB}/checkpoints/{held_id}/acks", json=acks, timeout=30
        )
        assert late.status_code in (307, 503), late.text
        beat = httpx.post(
            f"{zombie.address}/v1/jobs/{JOB}/heartbeat",
            json={"after_seq": 0, "run_id": driver.run_id},
            timeout=30,
        )
        assert beat.status_code in (307, 503), beat.text  # no notices from a lapsed lease

        wait_until(lambda: zombie.state() == "follower", timeout=30, message="zombie steps down")
        assert zombie.metric("sparkpoint_fenced_writes_total") >= 1
        assert held_id not in stored_ids(observer)
        assert set(before) <= set(stored_ids(observer))
        assert held_id not in driver.completed_ids()
        info = read_leader(observer)
        assert info is not None and info.instance_id == survivor.name
        assert_history_sound(driver, observer)
    finally:
        driver.stop()
