"""Interval, minimum pause and maximum concurrent checkpoints."""

from __future__ import annotations

from pathlib import Path

from sparkpoint.coordinator import CheckpointingOptions, TickReport
from sparkpoint.coordinator.trigger_rules import TriggerState, decide

from .support import make_harness


def test_decide_applies_each_rule() -> None:
    opts = CheckpointingOptions(interval_ms=1000, min_pause_ms=300, max_concurrent=2)
    assert decide(opts, TriggerState(999, 1000, 0, None)).reason == "not due"
    assert decide(opts, TriggerState(1000, 1000, 2, None)).retry_at_ms is None
    paused = decide(opts, TriggerState(1000, 1000, 1, 800))
    assert (paused.trigger, paused.retry_at_ms) == (False, 1100)
    assert decide(opts, TriggerState(1100, 1000, 1, 800)).trigger
    assert decide(opts, TriggerState(5000, 1000, 0, None)).trigger


def test_max_concurrent_blocks_periodic_triggers(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, max_concurrent=2, interval_ms=100)
    a = h.trigger_next()
    b = h.trigger_next()
    h.clock.advance(100)
    assert h.coordinator.tick().triggered is None
    assert h.coordinator.pending_checkpoint_ids() == [a, b]
    h.ack_all(b)  # completing b subsumes a: both slots free
    assert h.coordinator.pending_checkpoint_ids() == []
    assert h.coordinator.tick().triggered == b + 1
    assert h.coordinator.close(10)


def test_min_pause_counts_from_the_last_completion(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, interval_ms=1000, min_pause_ms=800)
    cid = h.trigger_next()
    h.clock.advance(900)
    h.ack_all(cid)  # completed 900 ms after its trigger
    h.clock.advance(100)  # interval has passed, pause has not
    report = h.coordinator.tick()
    assert report.triggered is None and report.next_tick_ms == h.clock.now + 700
    h.clock.advance(699)
    assert h.coordinator.tick().triggered is None
    h.clock.advance(1)
    assert h.coordinator.tick().triggered == cid + 1
    assert h.coordinator.close(10)


def test_interval_counts_from_the_actual_trigger(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, interval_ms=1000)
    h.clock.advance(3500)  # a late tick triggers once, not three times
    first = h.coordinator.tick().triggered
    h.ack_all(first)  # type: ignore[arg-type]
    assert h.coordinator.tick().triggered is None
    h.clock.advance(999)
    assert h.coordinator.tick().triggered is None
    h.clock.advance(1)
    assert h.coordinator.tick().triggered is not None
    assert h.coordinator.close(10)


def test_ids_come_only_from_the_counter(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1)
    h.counter.set_count(41)
    assert h.trigger_next() == 41
    assert h.counter.get() == 42
    assert h.coordinator.trigger_checkpoint() == 42
    assert h.coordinator.close(10)


def test_manual_checkpoint_ignores_concurrency(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, max_concurrent=1)
    a = h.trigger_next()
    b = h.coordinator.trigger_checkpoint()
    assert h.coordinator.pending_checkpoint_ids() == [a, b]
    assert h.coordinator.close(10)


def test_a_disconnected_job_is_not_triggered_but_still_expires(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, interval_ms=1000, timeout_ms=3000, tolerable_failures=1)
    cid = h.trigger_next()
    h.clock.advance(3000)
    report = h.coordinator.tick(allow_trigger=False)
    assert report == TickReport(None, (cid,), None)
    h.clock.advance(5000)
    assert h.coordinator.tick(allow_trigger=False).triggered is None
    assert h.coordinator.tick().triggered == cid + 1  # the driver is back
    assert h.coordinator.close(10)


def test_a_resumed_job_is_due_at_once_a_new_one_after_an_interval(tmp_path: Path) -> None:
    fresh = make_harness(tmp_path / "fresh", 1, interval_ms=1000, start=False)
    fresh.coordinator.start()
    assert fresh.coordinator.tick().triggered is None
    fresh.clock.advance(1000)
    assert fresh.coordinator.tick().triggered is not None
    assert fresh.coordinator.close(10)

    resumed = make_harness(tmp_path / "resumed", 1, interval_ms=1000, start=False)
    resumed.coordinator.start(due_now=True)
    first = resumed.coordinator.tick().triggered
    assert first is not None
    resumed.ack_all(first)
    assert resumed.coordinator.tick().triggered is None  # then the interval as usual
    resumed.clock.advance(1000)
    assert resumed.coordinator.tick().triggered == first + 1
    assert resumed.coordinator.close(10)


def test_a_new_run_hears_every_trigger_after_it_began_and_no_abort_of_the_old_one(
    tmp_path: Path,
) -> None:
    # A registration answers with where its run's notices begin. Taken when the run
    # began (not when the reply is written, after a ZooKeeper write): a trigger created
    # in between belongs to the new run, which must hear of it, or it holds the only
    # concurrency slot unheard until it times out.
    h = make_harness(tmp_path, 1, interval_ms=1000)
    old = h.trigger_next()
    aborted = h.coordinator.begin_run("run-2")
    assert aborted == [old]
    begun = h.coordinator.run_started_seq
    h.clock.advance(1000)
    new = h.coordinator.tick().triggered
    assert new is not None
    heard = [n.to_dict() for n in h.coordinator.notifications_since(begun)]
    assert [(n["type"], n["checkpoint_id"]) for n in heard] == [("trigger", new)]
    assert h.coordinator.close(10)
