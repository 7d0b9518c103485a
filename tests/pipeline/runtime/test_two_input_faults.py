"""Two-input pipelines exactly once across kill -9 (real ZooKeeper, real coordinator
processes, real driver processes): the interval join (orders ⋈ shipments, out of order
and partly late; memory backend) and the broadcast pattern (payments checked against
rules broadcast to every subtask; RocksDB), each with the coordinator leader killed
mid-run and then the active driver killed, a warm standby going on. What the sinks
committed must be what the examples' offline computations give, each line once; at the
end the broadcast map is the same on every subtask and is the one the rules read make.
(Rescaled 4 → 3 → 6 through savepoints: tests/pipeline/api/test_joins.py and
test_broadcast.py.)"""

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

SPLITS, PER_EPOCH = processes.SPLITS, processes.PER_EPOCH
#: Twice the other process tests' stream: both kills must come before its end.
PER_SPLIT = 2 * processes.PER_SPLIT
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
    """The generated inputs hold a few equal records (two equal shipments join an order
    twice): such a line is expected, and must be committed, more than once."""
    faults = processes.exactly_once_faults(committed, expected)
    assert not faults, f"{what}: {len(faults)} faults, first:\n" + "\n".join(faults[:10])


def check_shipments(work: Path, last: dict[str, object]) -> None:
    lines, late_orders, late_shipments = expected_shipped(
        clicks("shipments", 7).all_records(), clicks("shipments", 11).all_records(),
        PER_EPOCH // SPLITS,
    )  # fmt: skip
    assert len(lines) > 1_000 and late_orders and late_shipments
    exactly_once(processes.committed(work / "out"), lines, "pairs")
    exactly_once(processes.committed(work / "out-late" / "orders"), late_orders, "late orders")
    late = processes.committed(work / "out-late" / "shipments")
    exactly_once(late, late_shipments, "late shipments")


def check_fraud(work: Path, last: dict[str, object]) -> None:
    lines, limits = expected_checks(
        clicks("fraud", 7).all_records(), rules().all_records(), PER_EPOCH // SPLITS,
        RULES_PER_EPOCH,
    )  # fmt: skip
    exactly_once(processes.committed(work / "out"), lines, "checked payments")
    chk = work.parent / "checkpoints" / "fraud" / f"chk-{last['last_completed']}"
    maps = {e.subtask: e.value for e in read_operator_state_entries(str(chk), "check")}
    assert sorted(maps) == list(range(processes.PARALLELISM))
    assert all(m == limits for m in maps.values()) and limits


@pytest.mark.parametrize(
    ("example", "backend", "check"),
    [("shipments", "memory", check_shipments), ("fraud", "rocksdb", check_fraud)],
    ids=["interval-join", "broadcast"],
)
def test_leader_then_active_driver_killed_each_result_committed_once(
    tmp_path: Path, cluster: list[ReplicaProcess], observer, example: str, backend: str, check
) -> None:
    work = tmp_path / "job"
    args = ("--coordinator", processes.addresses(cluster), "--state-backend", backend)
    drivers = processes.active_and_standby(
        work, observer, example, *args, example=example, per_split=PER_SPLIT
    )
    with drivers as (active, standby):
        before = active.latest()
        leader = wait_leader(cluster)
        leader.kill()  # kill -9
        wait_until(
            lambda: (active.latest().get("last_completed") or 0) > before["last_completed"],
            timeout=300,
            message="the active driver's checkpoints completing again after the failover",
        )
        assert active.latest()["epoch"] < INPUT_EPOCHS, "the driver kill must come mid-stream"
        starts = [r for r in active.reports() if r.get("event") == "started"]
        assert len(starts) == 1 and starts[0]["restored_from"] is None  # never restarted
        last = processes.kill_active_and_let_the_standby_finish(active, standby)
    check(work, last)
