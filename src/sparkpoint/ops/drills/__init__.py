"""Failover drills: signal the leader (or ZooKeeper) of a real deployment, measure how long
leadership and checkpoints take to come back, and check the invariants that make failover
safe. ``sparkpoint drill …`` is the thin face over this package."""

from sparkpoint.ops.drills.invariants import (
    CheckpointDirectory,
    CompletionNotice,
    Invariant,
    LeaderSample,
    RestoreCheck,
    check_completions_unique,
    check_exactly_once,
    check_ids_rising,
    check_latest_restorable,
    check_no_id_reused,
    check_no_stale_directories,
    check_retained_kept,
    check_runs_take_turns,
    check_single_leader,
    clicks_read_per_split,
)
from sparkpoint.ops.drills.report import DrillReport, IterationResult

__all__ = [
    "CheckpointDirectory",
    "CompletionNotice",
    "DrillReport",
    "Invariant",
    "IterationResult",
    "LeaderSample",
    "RestoreCheck",
    "check_completions_unique",
    "check_exactly_once",
    "check_ids_rising",
    "check_latest_restorable",
    "check_no_id_reused",
    "check_no_stale_directories",
    "check_retained_kept",
    "check_runs_take_turns",
    "check_single_leader",
    "clicks_read_per_split",
]
