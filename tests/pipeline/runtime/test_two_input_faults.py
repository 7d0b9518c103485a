"""Two-input pipelines exactly once across kill -9 (real ZooKeeper, real coordinator
processes, real driver processes): the interval join (orders ⋈ shipments, out of order
and partly late) with the coordinator leader killed mid-run, and the broadcast pattern
(payments checked against rules broadcast to every subtask, keyed state in RocksDB) with
the active driver killed and a warm standby taking over. What the sinks committed must
be what the examples' offline computations give, each line once; after the takeover the
broadcast map is the same on every subtask and is the one the rules read make."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.examples.fraud import expected_checks
from sparkpoint.examples.run_clicks import EVENT_TIME_DEFAULTS, RULES_PER_EPOCH
from sparkpoint.examples.shipments import expected_shipped
from sparkpoint.pipeline import ClickEventSource
from sparkpoint.pipeline.state_processor.operator_entries import read_operator_state_entries
from tests.pipeline import processes
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # drivers, each starting Spark

SPLITS, PER_EPOCH, PER_SPLIT = processes.SPLITS, processes.PER_EPOCH, processes.PER_SPLIT
INPUT_EPOCHS = PER_SPLIT * SPLITS // PER_EPOCH


def clicks(example: str, seed: int) -> ClickEventSource:
    """What run_clicks generates for ``example`` with start_driver's arguments."""
    out_of_order_ms, late_every = EVENT_TIME_DEFAULTS[example]
    return ClickEventSource(
        splits=SPLITS, users=processes.USERS, records_per_epoch=PER_EPOCH,
        records_per_split=PER_SPLIT, seed=seed, out_of_order_ms=out_of_order_ms,
        late_every=late_every,
    )  # fmt: skip


def rules() -> ClickEventSource:
    return ClickEventSource(
        splits=1, users=1, records_per_epoch=RULES_PER_EPOCH,
        records_per_split=INPUT_EPOCHS * RULES_PER_EPOCH, seed=7 + 6,
    )  # fmt: skip


def exactly_once(committed: list[str], expected: list[str], what: str) -> None:
    faults = processes.exactly_once_faults(committed, expected)
    assert not faults, f"{what}: {len(faults)} faults, first:\n" + "\n".join(faults[:10])


def test_leader_killed_mid_run_the_interval_join_commits_each_pair_once(
    tmp_path: Path, cluster: list[ReplicaProcess]
) -> None:
    work = tmp_path / "job"
    driver = processes.start_driver(
        work, "--coordinator", processes.addresses(cluster), example="shipments"
    )
    wait_until(
        lambda: len(processes.committed(work / "out")) >= 50,
        timeout=300,
        message="joined pairs committed through the service",
    )
    leader = wait_leader(cluster)
    before = driver.latest()
    assert before["epoch"] < INPUT_EPOCHS, "the kill must come while records are joined"
    leader.kill()  # kill -9
    wait_until(
        lambda: (driver.latest().get("last_completed") or 0) > (before["last_completed"] or 0),
        timeout=180,
        message="checkpoints completing again after the failover",
    )
    assert driver.wait(timeout=300) == 0, driver.log.read_text()[-4000:]
    starts = [r for r in driver.reports() if r.get("event") == "started"]
    assert len(starts) == 1 and starts[0]["restored_from"] is None  # never restarted
    lines, late_orders, late_shipments = expected_shipped(
        clicks("shipments", 7).all_records(), clicks("shipments", 11).all_records(),
        PER_EPOCH // SPLITS,
    )  # fmt: skip
    assert len(lines) > 1_000 and late_orders and late_shipments
    exactly_once(processes.committed(work / "out"), lines, "pairs")
    exactly_once(processes.committed(work / "out-late" / "orders"), late_orders, "late orders")
    late = processes.committed(work / "out-late" / "shipments")
    exactly_once(late, late_shipments, "late shipments")


def test_active_driver_killed_the_standby_goes_on_with_the_broadcast_rules(
    tmp_path: Path, cluster: list[ReplicaProcess], observer
) -> None:
    work = tmp_path / "job"
    args = ("--coordinator", processes.addresses(cluster), "--state-backend", "rocksdb")
    with processes.active_and_standby(work, observer, "fraud", *args, example="fraud") as (
        active,
        standby,
    ):
        assert active.latest()["epoch"] < INPUT_EPOCHS, "the kill must come mid-stream"
        last = processes.kill_active_and_let_the_standby_finish(active, standby)
    lines, limits = expected_checks(
        clicks("fraud", 7).all_records(), rules().all_records(), PER_EPOCH // SPLITS,
        RULES_PER_EPOCH,
    )  # fmt: skip
    exactly_once(processes.committed(work / "out"), lines, "checked payments")
    chk = tmp_path / "checkpoints" / "fraud" / f"chk-{last['last_completed']}"
    maps = {e.subtask: e.value for e in read_operator_state_entries(str(chk), "check")}
    assert sorted(maps) == list(range(processes.PARALLELISM))
    assert all(m == limits for m in maps.values()) and limits
