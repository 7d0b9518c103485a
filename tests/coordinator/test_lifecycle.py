"""Trigger → acknowledgements → `_metadata` on disk → pointer in the store → completion
notice → subsumed files deleted: docs/architecture.md §4, in that order."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.checkpoint import CheckpointKind, JobGraph, OperatorSpec
from sparkpoint.coordinator import (
    AbortNotice,
    CheckpointCoordinator,
    CheckpointingOptions,
    CheckpointStatus,
    CompletionNotice,
    TriggerNotice,
)

from .support import (
    FailingCounter,
    FailingStore,
    Harness,
    ManualClock,
    RecordingStorage,
    keyed_state,
    make_harness,
    metadata_path,
)


def test_nothing_is_triggered_before_the_interval(harness: Harness) -> None:
    harness.clock.advance(999)
    assert harness.coordinator.tick().triggered is None
    harness.clock.advance(1)
    assert harness.coordinator.tick().triggered == 1


def test_full_lifecycle(harness: Harness) -> None:
    h = harness
    cid = h.trigger_next()
    [trigger] = h.coordinator.drain_notifications()
    assert isinstance(trigger, TriggerNotice)
    assert trigger.checkpoint_id == cid and trigger.kind is CheckpointKind.CHECKPOINT
    assert trigger.directory.endswith(f"chk-{cid}")

    partial = h.ack_all(cid, skip=1)
    assert partial.status is CheckpointStatus.IN_PROGRESS and partial.remaining == 1
    assert h.store.get_all() == []
    assert not (Path(trigger.directory) / "_metadata").exists()
    assert h.coordinator.drain_notifications() == []

    h.clock.advance(250)
    uid, i = sorted(h.graph.acknowledging_subtasks)[-1]
    done = h.coordinator.acknowledge(cid, uid, i, keyed_state(i, 3))
    assert done.status is CheckpointStatus.COMPLETED
    pointer = done.pointer
    assert pointer is not None and h.store.get_latest() == pointer
    assert metadata_path(pointer) == Path(trigger.directory) / "_metadata"
    completed = h.storage.read_metadata(pointer.metadata_uri)
    assert completed.checkpoint_id == cid and completed.job_id == h.graph.job_id
    assert set(completed.operator_states) == {"op0", "op1"}
    assert completed.operator_states["op1"].subtask_states[2] == keyed_state(2, 3)
    assert pointer.trigger_timestamp_ms == trigger.timestamp_ms
    assert pointer.duration_ms == 250
    assert pointer.state_size == 5 * len("state")
    assert pointer.metadata_checksum

    [notice] = h.coordinator.drain_notifications()
    assert notice == CompletionNotice(
        notice.seq, cid, CheckpointKind.CHECKPOINT, pointer.metadata_uri, trigger.timestamp_ms
    )
    assert h.coordinator.pending_checkpoint_ids() == []


def test_next_checkpoint_subsumes_the_oldest_and_deletes_its_files_after_notice(
    harness: Harness,
) -> None:
    h = harness
    first = h.trigger_next()
    p1 = h.ack_all(first).pointer
    second = h.trigger_next()
    p2 = h.ack_all(second).pointer
    assert h.store.get_all() == [p2]
    assert h.coordinator.cleanup.wait_idle(10)
    assert not metadata_path(p1).exists()
    assert metadata_path(p2).exists()
    assert h.storage.discarded == [first]
    kinds = [type(n).__name__ for n in h.coordinator.drain_notifications()]
    assert kinds == ["TriggerNotice", "CompletionNotice"] * 2


def test_retains_as_many_as_configured(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, max_retained=3)
    ids = []
    for _ in range(5):
        cid = h.trigger_next()
        h.ack_all(cid)
        ids.append(cid)
    assert [p.checkpoint_id for p in h.store.get_all()] == ids[-3:]
    assert h.coordinator.close(10)
    assert h.checkpoint_dirs() == [f"chk-{i}" for i in ids[-3:]]


def test_a_failing_metadata_write_leaves_nothing_in_the_store(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 2, 3, tolerable_failures=1)
    cid = h.trigger_next()
    h.ack_all(cid, skip=1)
    # Make the directory unusable the way a broken filesystem would: a file where the
    # checkpoint directory should be (root ignores permission bits, so chmod would not do).
    directory = h.root / "checkpoints" / h.graph.job_id / f"chk-{cid}"
    directory.rmdir()
    directory.write_bytes(b"not a directory")
    result = _ack_last(h, cid)
    assert result.status is CheckpointStatus.FAILED
    assert "writing _metadata" in (result.reason or "")
    assert h.store.get_all() == []
    notices = h.coordinator.drain_notifications()
    assert not any(isinstance(n, CompletionNotice) for n in notices)
    assert isinstance(notices[-1], AbortNotice) and notices[-1].checkpoint_id == cid

    # The next checkpoint proceeds normally.
    nxt = h.trigger_next()
    assert h.ack_all(nxt).status is CheckpointStatus.COMPLETED
    assert [p.checkpoint_id for p in h.store.get_all()] == [nxt]
    assert h.coordinator.close(10)


def test_a_store_refusal_gives_no_completion_notice(harness: Harness) -> None:
    h = harness
    low = h.trigger_next()
    high = h.coordinator.trigger_checkpoint()
    h.ack_all(high)
    assert h.store.get_latest().checkpoint_id == high  # type: ignore[union-attr]
    # `low` was aborted as subsumed when `high` completed; acks for it are refused.
    notices = h.coordinator.drain_notifications()
    assert [n.checkpoint_id for n in notices if isinstance(n, CompletionNotice)] == [high]
    assert any(isinstance(n, AbortNotice) and n.checkpoint_id == low for n in notices)


def test_a_graph_without_acknowledging_operators_completes_at_trigger(tmp_path: Path) -> None:
    graph = JobGraph("stateless", (OperatorSpec("map", 2, 128, acknowledges=False),))
    clock = ManualClock()
    store = FailingStore()
    coordinator = CheckpointCoordinator(
        graph,
        CheckpointingOptions(interval_ms=100),
        counter=FailingCounter(),
        store=store,
        storage=RecordingStorage(tmp_path),
        clock=clock,
    )
    coordinator.start()
    clock.advance(100)
    assert coordinator.tick().triggered == 1
    assert store.get_latest() is not None and store.get_latest().checkpoint_id == 1  # type: ignore[union-attr]
    assert coordinator.close(10)


def _ack_last(h: Harness, cid: int):  # type: ignore[no-untyped-def]
    uid, i = sorted(h.graph.acknowledging_subtasks)[-1]
    return h.coordinator.acknowledge(cid, uid, i, keyed_state(i, h.graph.operator(uid).parallelism))
