"""The statistics a Flink-like checkpoint overview is rendered from, and the metrics."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import REGISTRY

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer

from .support import Harness, make_harness


def _metric(name: str, job: str) -> float:
    return REGISTRY.get_sample_value(name, {"job_id": job}) or 0.0


def test_overview_counts_latest_and_history(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 2, tolerable_failures=5, history_size=3, max_concurrent=2)
    c1 = h.trigger_next()
    h.clock.advance(100)
    h.ack_all(c1)
    c2 = h.trigger_next()
    h.coordinator.decline(c2, "op0", 1, "nope")
    s1 = h.coordinator.trigger_savepoint()
    h.clock.advance(40)
    h.ack_all(s1)
    c3 = h.trigger_next()
    restored = CheckpointPointer(
        h.graph.job_id, 7, CheckpointKind.CHECKPOINT, 1, 2, "file:///old/chk-7/_metadata"
    )
    h.coordinator.record_restored(restored)

    overview = h.coordinator.to_dict()
    assert overview["job_status"] == "RUNNING"
    assert overview["pending"] == [c3]
    assert overview["counts"] == {
        "restored": 1,
        "total": 4,
        "in_progress": 1,
        "completed": 2,
        "failed": 1,
    }
    latest = overview["latest"]
    assert latest["completed"]["id"] == c1 and latest["completed"]["end_to_end_duration"] == 100
    assert latest["savepoint"]["id"] == s1 and latest["savepoint"]["is_savepoint"]
    assert latest["failed"]["id"] == c2 and latest["failed"]["failure_message"].endswith("nope")
    assert latest["restored"] == {
        "id": 7,
        "restore_timestamp": h.clock.now,
        "is_savepoint": False,
        "external_path": "file:///old/chk-7/_metadata",
    }
    history = overview["history"]
    assert [r["id"] for r in history] == [c3, s1, c2]  # newest first, the last 3
    assert [r["status"] for r in history] == ["IN_PROGRESS", "COMPLETED", "FAILED"]
    assert history[0]["num_subtasks"] == 2 and history[0]["num_acknowledged_subtasks"] == 0
    assert history[1]["state_size"] == 2 * len("state")
    summary = overview["summary"]
    assert summary["end_to_end_duration"] == {"min": 40, "max": 100, "avg": 70}
    assert h.coordinator.close(10)


def test_metrics_are_recorded_per_job(harness: Harness) -> None:
    h = harness
    job = h.graph.job_id
    c1 = h.trigger_next()
    assert _metric("sparkpoint_checkpoints_triggered_total", job) == 1
    assert _metric("sparkpoint_pending_checkpoints", job) == 1
    h.clock.advance(500)
    pointer = h.ack_all(c1).pointer
    assert pointer is not None
    assert _metric("sparkpoint_checkpoints_completed_total", job) == 1
    assert _metric("sparkpoint_pending_checkpoints", job) == 0
    assert _metric("sparkpoint_checkpoint_duration_seconds_count", job) == 1
    assert _metric("sparkpoint_checkpoint_duration_seconds_sum", job) == 0.5
    assert _metric("sparkpoint_checkpoint_finalize_duration_seconds_count", job) == 1
    assert _metric("sparkpoint_last_completed_checkpoint_timestamp_seconds", job) == (
        pointer.completion_timestamp_ms / 1000
    )
    assert _metric("sparkpoint_last_completed_checkpoint_size_bytes", job) == pointer.state_size
    h.coordinator.decline(h.trigger_next(), "op0", 0, "x")
    assert _metric("sparkpoint_checkpoints_failed_total", job) == 1
