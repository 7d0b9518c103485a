"""Expiry, decline and the tolerable consecutive failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from sparkpoint.checkpoint import JobStatus
from sparkpoint.coordinator import (
    AbortNotice,
    CheckpointFinishedError,
    CheckpointStatus,
    TriggerRejectedError,
)

from .support import Harness, keyed_state, make_harness


def _sample(metric: str, job: str) -> float:
    return REGISTRY.get_sample_value(metric, {"job_id": job}) or 0.0


def test_a_checkpoint_expires_after_its_timeout(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 2, timeout_ms=5000, interval_ms=1000, tolerable_failures=5)
    cid = h.trigger_next()
    h.coordinator.acknowledge(cid, "op0", 0, keyed_state(0, 2))
    h.clock.advance(4999)
    assert h.coordinator.tick().expired == ()  # due at trigger + 5000
    h.clock.advance(1)
    report = h.coordinator.tick()
    assert report.expired == (cid,)
    assert report.triggered == cid + 1  # the slot freed, and the interval had passed
    aborts = [n for n in h.coordinator.drain_notifications() if isinstance(n, AbortNotice)]
    assert aborts[0].checkpoint_id == cid
    assert "expired after 5000 ms with 1/2" in aborts[0].reason and "op0[1]" in aborts[0].reason
    with pytest.raises(CheckpointFinishedError) as late:
        h.coordinator.acknowledge(cid, "op0", 1, keyed_state(1, 2))
    assert late.value.status == "FAILED" and "expired after 5000 ms" in str(late.value)
    assert h.store.get_all() == []
    assert _sample("sparkpoint_checkpoints_expired_total", h.graph.job_id) == 1
    assert h.coordinator.close(10)
    assert f"chk-{cid}" not in h.checkpoint_dirs()  # the aborted directory is deleted


def test_next_tick_is_the_earliest_deadline(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, timeout_ms=5000, interval_ms=1000, max_concurrent=1)
    cid = h.trigger_next()
    trigger_ms = h.clock.now
    assert h.coordinator.tick().next_tick_ms == trigger_ms + 1000  # the next interval
    h.clock.advance(1000)
    # Blocked by max concurrent: only the expiry can change things by time alone.
    assert h.coordinator.tick().next_tick_ms == trigger_ms + 5000
    h.ack_all(cid)
    assert h.coordinator.tick().triggered == cid + 1
    assert h.coordinator.close(10)


def test_a_decline_fails_the_checkpoint(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 2, tolerable_failures=1)
    cid = h.trigger_next()
    h.coordinator.acknowledge(cid, "op0", 0, keyed_state(0, 2))
    h.coordinator.decline(cid, "op0", 1, "disk full")
    [*_, abort] = h.coordinator.drain_notifications()
    assert isinstance(abort, AbortNotice)
    assert abort.reason == "declined by operator 'op0' subtask 1: disk full"
    assert h.coordinator.pending_checkpoint_ids() == []
    assert h.store.get_all() == []
    assert h.coordinator.job_status is JobStatus.RUNNING
    history = h.coordinator.stats.history()
    assert (
        history[0].status is CheckpointStatus.FAILED and history[0].failure_message == abort.reason
    )
    assert h.coordinator.close(10)


def test_beyond_tolerable_failures_the_job_is_failing_and_says_why(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, tolerable_failures=2, timeout_ms=500, interval_ms=1000)
    for n in range(3):
        cid = h.trigger_next()
        h.coordinator.decline(cid, "op0", 0, f"boom {n}")
        assert (h.coordinator.job_status is JobStatus.FAILING) == (n == 2)
    reason = h.coordinator.failure_reason or ""
    assert "tolerable failure threshold (2)" in reason and "boom 2" in reason
    h.clock.advance(10_000)
    assert h.coordinator.tick().triggered is None
    with pytest.raises(TriggerRejectedError, match="FAILING"):
        h.coordinator.trigger_savepoint()
    assert h.coordinator.to_dict()["job_status"] == "FAILING"
    assert h.coordinator.close(10)


def test_a_completion_resets_the_consecutive_failures(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, tolerable_failures=1)
    h.coordinator.decline(h.trigger_next(), "op0", 0, "first")
    h.ack_all(h.trigger_next())
    h.coordinator.decline(h.trigger_next(), "op0", 0, "second")
    assert h.coordinator.job_status is JobStatus.RUNNING
    h.coordinator.decline(h.trigger_next(), "op0", 0, "third")
    assert h.coordinator.job_status is JobStatus.FAILING
    assert h.coordinator.close(10)


def test_failing_aborts_the_other_pending_checkpoints(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, max_concurrent=2, tolerable_failures=0)
    first = h.trigger_next()
    second = h.trigger_next()
    h.coordinator.decline(second, "op0", 0, "broken")
    assert h.coordinator.pending_checkpoint_ids() == []
    with pytest.raises(CheckpointFinishedError):
        h.coordinator.acknowledge(first, "op0", 0, keyed_state(0, 1))
    assert h.store.get_all() == []
    assert h.coordinator.close(10)


def test_a_failing_trigger_counts_as_a_failure(harness: Harness) -> None:
    h = harness
    # A file where the job's checkpoint directory goes: chk-N cannot be created.
    (h.root / "checkpoints").mkdir(parents=True, exist_ok=True)
    (h.root / "checkpoints" / h.graph.job_id).write_bytes(b"")
    h.clock.advance(1000)
    assert h.coordinator.tick().triggered is None
    assert h.coordinator.job_status is JobStatus.FAILING
    assert "preparing the directory of checkpoint 1" in (h.coordinator.failure_reason or "")
    assert h.coordinator.drain_notifications() == []  # the pipeline never heard of it
    assert h.coordinator.stats.to_dict()["counts"]["failed"] == 1  # type: ignore[index]
