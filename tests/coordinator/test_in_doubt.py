"""A store write whose reply is lost stays in doubt all the way up, and the writer never
discards the files of a checkpoint ZooKeeper may list (real ZooKeeper, real files, the
reply dropped by a fault proxy between the leader and its server)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.coordinator import AbortNotice, CheckpointCoordinator, CheckpointingOptions
from sparkpoint.counter import StandaloneCheckpointIDCounter
from sparkpoint.ha import Fence, Op, PossiblyAppliedError, ZooKeeperConnection, read_epoch
from sparkpoint.ha.connection import ConnectionState
from sparkpoint.ha.fencing import bump_epoch
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.ops.drills.faults import TO_CLIENT, FaultProxy
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.support.waiting import wait_until
from tests.support.zk import settings_for

from .support import Harness, ManualClock, RecordingStorage, keyed_state, make_graph


@dataclasses.dataclass
class Setup:
    proxy: FaultProxy
    leader: ZooKeeperConnection  # through the proxy
    other: ZooKeeperConnection  # straight to the server: a successor, an observer
    fence: Fence
    h: Harness


@pytest.fixture
def setup(zk_server: LocalZooKeeper, tmp_path: Path) -> Iterator[Setup]:
    host, _, port = zk_server.connect_string.split(",")[0].rpartition(":")
    with FaultProxy(host, int(port)) as proxy:
        settings = settings_for(proxy.connect_string, session_timeout_s=4.0)
        leader = ZooKeeperConnection(settings).start()
        other = ZooKeeperConnection(
            dataclasses.replace(settings, quorum=zk_server.connect_string)
        ).start()
        fence = Fence(leader, bump_epoch(leader, read_epoch(leader), b"{}"))
        graph = make_graph(2)
        store = ZooKeeperCompletedCheckpointStore(leader, graph.job_id, fence, max_retained=1)
        store.recover()
        options = CheckpointingOptions(interval_ms=1000, timeout_ms=60_000)
        clock = ManualClock()
        storage = RecordingStorage(tmp_path / "checkpoints")
        counter = StandaloneCheckpointIDCounter()
        coordinator = CheckpointCoordinator(
            graph, options, counter=counter, store=store, storage=storage, clock=clock
        )
        coordinator.start()
        h = Harness(coordinator, clock, counter, store, storage, graph, options, tmp_path)  # type: ignore[arg-type]
        try:
            yield Setup(proxy, leader, other, fence, h)
        finally:
            proxy.heal()
            h.coordinator.close(timeout=10)
            other.close()
            leader.close()


def _listed(s: Setup) -> list[int]:
    store = ZooKeeperCompletedCheckpointStore(s.other, s.h.graph.job_id, None)
    return [p.checkpoint_id for p in store.recover()]


def _complete_first(s: Setup) -> int:
    cid = s.h.trigger_next()
    s.h.ack_all(cid)
    assert _listed(s) == [cid]
    return cid


def _ack_last_with_reply_dropped(s: Setup, cid: int) -> dict[str, Any]:
    """Acknowledge the last subtask while the leader's replies are dropped; return once
    ZooKeeper lists ``cid`` (the store write was applied, its reply is lost)."""
    s.h.ack_all(cid, skip=1)
    uid, i = sorted(s.h.graph.acknowledging_subtasks)[-1]
    outcome: dict[str, Any] = {}

    def ack() -> None:
        try:
            outcome["result"] = s.h.coordinator.acknowledge(cid, uid, i, keyed_state(i, 2))
        except BaseException as exc:
            outcome["error"] = exc

    s.proxy.drop(TO_CLIENT)
    thread = threading.Thread(target=ack, daemon=True)
    thread.start()
    wait_until(lambda: cid in _listed(s), timeout=20, message=f"checkpoint {cid} applied")
    outcome["thread"] = thread
    return outcome


def _finish(outcome: dict[str, Any]) -> None:
    outcome["thread"].join(60)
    assert not outcome["thread"].is_alive()


def _files_kept(s: Setup, cid: int) -> None:
    assert s.h.coordinator.cleanup.wait_idle(10)
    assert cid not in s.h.storage.discarded
    assert f"chk-{cid}" in s.h.checkpoint_dirs()
    store = ZooKeeperCompletedCheckpointStore(s.other, s.h.graph.job_id, None)
    [pointer] = [p for p in store.recover() if p.checkpoint_id == cid]
    checkpoint = s.h.storage.read_metadata(pointer.metadata_uri)  # what ZooKeeper lists loads
    assert [c.problem for c in s.h.storage.verify(checkpoint) if c.problem] == []


def test_reply_lost_then_takeover_keeps_the_listed_checkpoint(setup: Setup) -> None:
    s = setup
    first = _complete_first(s)
    cid = s.h.trigger_next()
    outcome = _ack_last_with_reply_dropped(s, cid)
    bump_epoch(s.other, read_epoch(s.other), b"{}")  # a successor takes over meanwhile
    s.proxy.reset()  # the lost reply's connection dies
    s.proxy.heal()
    _finish(outcome)
    assert _listed(s) == [cid]
    _files_kept(s, cid)
    assert s.fence.is_fenced  # deposed: the leader steps down
    # The pointer did land before the bump, so the checkpoint is complete, and the files of
    # the one it subsumed (removed from ZooKeeper by the same transaction) may go.
    assert "error" not in outcome, outcome
    assert first in s.h.storage.discarded


def test_reply_lost_without_takeover_keeps_the_listed_checkpoint(setup: Setup) -> None:
    s = setup
    _complete_first(s)
    cid = s.h.trigger_next()
    outcome = _ack_last_with_reply_dropped(s, cid)
    s.proxy.reset()
    s.proxy.heal()
    _finish(outcome)
    assert "error" not in outcome, outcome
    assert _listed(s) == [cid]
    _files_kept(s, cid)
    assert not s.fence.is_fenced


def test_reread_failing_leaves_the_write_in_doubt(setup: Setup) -> None:
    s = setup
    _complete_first(s)
    cid = s.h.trigger_next()
    outcome = _ack_last_with_reply_dropped(s, cid)
    s.proxy.reset()  # and keeps resetting: neither the epoch nor the pointer can be re-read
    _finish(outcome)
    assert isinstance(outcome.get("error"), PossiblyAppliedError), outcome
    assert _listed(s) == [cid]
    notices = s.h.coordinator.drain_notifications()
    assert not any(isinstance(n, AbortNotice) and n.checkpoint_id == cid for n in notices)
    _files_kept(s, cid)


def test_in_doubt_write_after_a_takeover_is_in_doubt_and_fences(setup: Setup) -> None:
    s = setup
    path = f"{s.leader.paths.leader}/in-doubt-probe"
    fenced: list[object] = []
    fence = Fence(s.leader, s.fence.epoch, on_fenced=fenced.append)
    s.proxy.drop(TO_CLIENT)
    outcome: dict[str, Any] = {}

    def write() -> None:
        try:
            fence.commit([Op.create(path, b"x")], "probing")
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    wait_until(lambda: s.other.client.exists(path), timeout=20, message="write applied")
    bump_epoch(s.other, read_epoch(s.other), b"{}")
    s.proxy.reset()
    s.proxy.heal()
    thread.join(60)
    assert isinstance(outcome.get("error"), PossiblyAppliedError), outcome
    assert "deposed" in str(outcome["error"])
    assert fence.is_fenced and len(fenced) == 1
    assert s.leader.wait_for(ConnectionState.CONNECTED, 20)


def test_a_store_in_doubt_reads_zookeeper_again_before_it_answers(setup: Setup) -> None:
    # What a restore plan asks: after an add whose outcome is unknown, the store must not
    # answer from its view from before the write (which still names the subsumed one).
    s = setup
    first = _complete_first(s)
    cid = s.h.trigger_next()
    outcome = _ack_last_with_reply_dropped(s, cid)
    s.proxy.reset()
    _finish(outcome)
    assert isinstance(outcome.get("error"), PossiblyAppliedError), outcome
    s.proxy.heal()
    wait_until(lambda: s.leader.state is ConnectionState.CONNECTED, timeout=30,
               message="the leader's connection back")  # fmt: skip
    latest = s.h.store.get_latest()
    assert latest is not None and latest.checkpoint_id == cid
    assert [p.checkpoint_id for p in s.h.store.get_all()] == [cid]
    assert first != cid
