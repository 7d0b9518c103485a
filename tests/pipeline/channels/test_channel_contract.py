"""What a driver sees of its coordinator, the same through either channel: the embedded
one (the coordinator in the driver's process) and the remote one (a real coordinator
replica on a real ZooKeeper, over the real REST API). Every behaviour a driver acts on —
a trigger, a completion, a finalisation that fails, a superseded run, a standby granted
the job, a restore plan — is asserted once, against both."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkpoint.checkpoint import CheckpointKind, JobGraph, OperatorSpec
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.pipeline import EmbeddedChannel
from sparkpoint.pipeline.channels.protocol import (
    CheckpointChannel,
    CheckpointCompleted,
    RunNotice,
    RunSuperseded,
    TriggerCheckpoint,
)
from sparkpoint.pipeline.channels.remote import RemoteChannel
from tests.coordinator.support import keyed_state
from tests.service.support import start_in_process
from tests.support.waiting import wait_until

JOB = "contract"
#: Checkpoints only when asked; a failed one leaves the job running.
CONFIG = {"interval_ms": 3_600_000, "tolerable_failures": 3}


def graph(parallelism: int = 2) -> JobGraph:
    return JobGraph(JOB, (OperatorSpec("count", parallelism, 128, keyed=True),))


@dataclass
class Channels:
    """``first()``: a driver's channel; ``another(channel)``: a channel for another run of
    the same job, as a second driver process (or a restarted one) would have."""

    first: Callable[[], CheckpointChannel]
    another: Callable[[CheckpointChannel], CheckpointChannel]


@pytest.fixture(params=["embedded", "remote"])
def channels(
    request: pytest.FixtureRequest, tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str
) -> Iterator[Channels]:
    opened: list[CheckpointChannel] = []

    def keep(channel: CheckpointChannel) -> CheckpointChannel:
        opened.append(channel)
        return channel

    if request.param == "embedded":
        first = EmbeddedChannel(
            str(tmp_path / "checkpoints"), **CONFIG, driver_takeover_timeout_s=3600
        )
        yield Channels(lambda: keep(first), lambda c: keep(c.another_run()))  # type: ignore[attr-defined]
    else:
        service = start_in_process(
            tmp_path, zk_server.connect_string, cluster_id, {"driver.takeover-timeout": "1 h"}
        )

        def remote() -> CheckpointChannel:
            return keep(RemoteChannel([service.address], checkpoint_config=CONFIG))

        try:
            yield Channels(remote, lambda _: remote())
        finally:
            for channel in opened:
                channel.close()
            service.stop()
        return
    for channel in opened:
        channel.close()


def heard(channel: CheckpointChannel, wanted: Callable[[RunNotice], bool]) -> RunNotice:
    """The first notice ``wanted`` picks, heartbeating until it comes."""
    found: list[RunNotice] = []

    def look() -> bool:
        found.extend(n for n in channel.heartbeat() if wanted(n))
        return bool(found)

    wait_until(look, timeout=30, message="the notice the driver waits for")
    return found[0]


def acks(g: JobGraph) -> list[tuple[str, int, object]]:
    return [(op.uid, i, keyed_state(i, op.parallelism)) for op in g.operators
            for i in range(op.parallelism)]  # fmt: skip


def checkpoint(channel: CheckpointChannel, g: JobGraph) -> int:
    """Trigger, hear the trigger, acknowledge every subtask, hear the completion."""
    cid = channel.trigger_checkpoint()
    trigger = heard(channel, lambda n: isinstance(n, TriggerCheckpoint) and n.checkpoint_id == cid)
    assert trigger.kind is CheckpointKind.CHECKPOINT and trigger.directory  # type: ignore[union-attr]
    assert channel.acknowledge(cid, acks(g))  # type: ignore[arg-type]
    done = heard(channel, lambda n: isinstance(n, CheckpointCompleted) and n.checkpoint_id == cid)
    assert done.seq > trigger.seq
    return cid


def test_a_completed_checkpoint_is_what_the_next_run_restores_at_any_parallelism(
    channels: Channels,
) -> None:
    driver = channels.first()
    driver.register(graph(2))
    assert driver.restore(graph(2)) is None  # a first start
    cid = checkpoint(driver, graph(2))

    restarted = channels.another(driver)
    restarted.register(graph(3))
    restored = restarted.restore(graph(3))
    assert restored is not None
    assert (restored.checkpoint_id, restored.kind) == (cid, CheckpointKind.CHECKPOINT)
    assert len(restored.plan.operators["count"].subtasks) == 3
    assert restarted.trigger_checkpoint() > cid  # ids continue above the restored one


def test_a_checkpoint_whose_finalisation_fails_is_dropped_and_the_next_completes(
    channels: Channels,
) -> None:
    driver = channels.first()
    driver.register(graph())
    cid = driver.trigger_checkpoint()
    trigger = heard(driver, lambda n: isinstance(n, TriggerCheckpoint))
    directory = Path(trigger.directory)  # type: ignore[union-attr]
    shutil.rmtree(directory, ignore_errors=True)
    directory.parent.mkdir(parents=True, exist_ok=True)
    directory.write_bytes(b"not a directory")  # `_metadata` cannot be written into it
    assert driver.acknowledge(cid, acks(graph())) is False  # type: ignore[arg-type]
    heard(driver, lambda n: n.type == "abort" and n.checkpoint_id == cid)
    directory.unlink(missing_ok=True)  # the aborted checkpoint's location may be gone
    assert checkpoint(driver, graph()) > cid


def test_a_superseded_run_is_refused_everything(channels: Channels) -> None:
    older = channels.first()
    old_run = older.register(graph())
    cid = older.trigger_checkpoint()
    heard(older, lambda n: isinstance(n, TriggerCheckpoint))
    newer = channels.another(older)
    new_run = newer.register(graph())
    for call in (
        older.heartbeat,
        lambda: older.acknowledge(cid, acks(graph())),  # type: ignore[arg-type]
        older.trigger_checkpoint,
        lambda: older.restore(graph()),
    ):
        with pytest.raises(RunSuperseded) as refused:
            call()
        assert old_run in str(refused.value) and new_run in str(refused.value)
    # The older run's checkpoint was aborted when the newer registered.
    assert checkpoint(newer, graph()) > cid


def test_a_standby_is_granted_the_job_when_the_active_run_releases_it(
    channels: Channels,
) -> None:
    active = channels.first()
    active_run = active.register(graph())
    checkpoint(active, graph())
    standby = channels.another(active)
    standby_run = standby.register(graph(), standby=True)
    assert standby_run != active_run
    granted: list[list[RunNotice]] = []
    waiter = threading.Thread(target=lambda: granted.append(standby.wait_for_grant()), daemon=True)
    waiter.start()
    active.heartbeat()  # still the active run: the standby waits
    assert not granted
    active.release()
    waiter.join(60)
    assert granted, "the standby was granted the job"
    # The grant makes a checkpoint due at once: the standby hears its trigger first.
    trigger = next((n for n in granted[0] if isinstance(n, TriggerCheckpoint)), None) or heard(
        standby, lambda n: isinstance(n, TriggerCheckpoint)
    )
    assert standby.restore(graph()) is not None
    assert standby.acknowledge(trigger.checkpoint_id, acks(graph()))  # type: ignore[arg-type]
    with pytest.raises(RunSuperseded):
        active.heartbeat()
