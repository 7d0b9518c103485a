"""One contract, two implementations: the standalone counter and the ZooKeeper counter."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.checkpoint import InvalidCheckpointValue, JobStatus
from sparkpoint.counter import (
    CheckpointIDCounter,
    StandaloneCheckpointIDCounter,
    ZooKeeperCheckpointIDCounter,
)
from sparkpoint.counter.zookeeper import decode_count
from sparkpoint.ha import Fence, FencedError, ZooKeeperConnection, read_epoch
from sparkpoint.ha.fencing import bump_epoch
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper


@pytest.fixture(params=["standalone", "zookeeper"])
def make_counter(request: pytest.FixtureRequest, zk_conn: ZooKeeperConnection) -> Iterator[object]:
    def make(job: str = "job-1") -> CheckpointIDCounter:
        if request.param == "standalone":
            return StandaloneCheckpointIDCounter()
        return ZooKeeperCheckpointIDCounter(zk_conn, job, Fence(zk_conn, read_epoch(zk_conn)))

    yield make


def test_ids_start_at_one_and_rise_by_one(make_counter) -> None:
    counter = make_counter()
    counter.start()
    assert counter.get() == 1
    assert [counter.get_and_increment() for _ in range(5)] == [1, 2, 3, 4, 5]
    assert counter.get() == 6
    assert isinstance(counter, CheckpointIDCounter)


def test_set_count_moves_the_next_id(make_counter) -> None:
    counter = make_counter()
    counter.start()
    counter.set_count(100)
    assert counter.get_and_increment() == 100
    with pytest.raises(InvalidCheckpointValue):
        counter.set_count(0)


def test_zookeeper_counter_survives_its_owner(zk_conn: ZooKeeperConnection, connect) -> None:
    fence = Fence(zk_conn, read_epoch(zk_conn))
    first = ZooKeeperCheckpointIDCounter(zk_conn, "job-s", fence)
    first.start()
    issued = [first.get_and_increment() for _ in range(7)]
    first.shutdown(JobStatus.SUSPENDED)  # leadership lost: the value must stay

    other = connect()
    successor = ZooKeeperCheckpointIDCounter(other, "job-s", Fence(other, read_epoch(other)))
    successor.start()  # must not reset an existing counter
    assert successor.get_and_increment() > max(issued)


def test_zookeeper_counter_removed_only_when_globally_terminal(
    zk_conn: ZooKeeperConnection,
) -> None:
    counter = ZooKeeperCheckpointIDCounter(zk_conn, "job-t", Fence(zk_conn, read_epoch(zk_conn)))
    counter.start()
    counter.get_and_increment()
    for status in (JobStatus.SUSPENDED, JobStatus.RUNNING, JobStatus.FAILING):
        counter.shutdown(status)
        assert zk_conn.client.exists(counter.path) is not None
    counter.shutdown(JobStatus.FINISHED)
    assert zk_conn.client.exists(counter.path) is None


def test_set_count_never_moves_backwards_in_zookeeper(zk_conn: ZooKeeperConnection) -> None:
    counter = ZooKeeperCheckpointIDCounter(zk_conn, "job-b", Fence(zk_conn, read_epoch(zk_conn)))
    counter.start()
    counter.set_count(50)
    counter.set_count(10)  # restoring an older savepoint must not make ids reusable
    assert counter.get() == 50


def test_deposed_leader_issues_no_id(zk_conn: ZooKeeperConnection) -> None:
    epoch = read_epoch(zk_conn)
    counter = ZooKeeperCheckpointIDCounter(zk_conn, "job-f", Fence(zk_conn, epoch))
    counter.start()
    counter.get_and_increment()
    raw_before, stat_before = zk_conn.client.get(counter.path)
    bump_epoch(zk_conn, epoch, b"{}")
    with pytest.raises(FencedError):
        counter.get_and_increment()
    raw_after, stat_after = zk_conn.client.get(counter.path)
    assert (raw_after, stat_after.version) == (raw_before, stat_before.version)
    assert decode_count(raw_after, counter.path) == 2


@pytest.mark.slow
def test_four_processes_racing_get_contiguous_distinct_ids(
    tmp_path: Path, zk_server: LocalZooKeeper, zk_settings
) -> None:
    racers = []
    root = Path(__file__).resolve().parents[2]
    for i in range(4):
        out = tmp_path / f"racer-{i}.ids"
        command = [sys.executable, "-m", "tests.support.counter_race", zk_server.connect_string]
        command += [zk_settings.cluster_id, "raced", "500", str(out)]
        racers.append((out, subprocess.Popen(command, cwd=root)))
    for out, _ in racers:
        Path(f"{out}.go").touch()
    for _, proc in racers:
        assert proc.wait(240) == 0
    ids = [int(x) for out, _ in racers for x in out.read_text().split()]
    assert len(ids) == 2000
    assert sorted(ids) == list(range(1, 2001))
    for out, _ in racers:  # each racer saw its own ids rise
        own = [int(x) for x in out.read_text().split()]
        assert own == sorted(own)
