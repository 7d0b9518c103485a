"""Every Prometheus metric sparkpoint exports, defined once (prometheus-client).

A leaf module: whoever records a metric imports it from here; the service serves the
default registry at /metrics. Names follow Prometheus conventions (base units, `_total`
for counters, `_seconds`/`_bytes` suffixes).
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Enum, Gauge, Histogram, Info

from sparkpoint import __version__

_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

# --- the process --------------------------------------------------------------------------
BUILD_INFO = Info("sparkpoint_build", "The sparkpoint version this process runs (value 1).")
BUILD_INFO.info({"version": __version__})

# --- leadership and ZooKeeper -------------------------------------------------------------
IS_LEADER = Gauge("sparkpoint_is_leader", "1 while this coordinator is the active leader.")
LEADER_TERM = Gauge(
    "sparkpoint_leader_term",
    "Term (fencing number) of the current leadership as last seen here: rises by one at "
    "every change of leader.",
)
#: The old name of sparkpoint_leader_term, kept for one release.
LEADER_EPOCH = Gauge(
    "sparkpoint_leader_epoch", "Deprecated: sparkpoint_leader_term (removed in the next release)."
)
LEADER_CHANGES = Counter(
    "sparkpoint_leader_changes_total", "Times this coordinator gained or lost leadership."
)
FENCED_WRITES = Counter(
    "sparkpoint_fenced_writes_total",
    "Writes refused because the leader term had moved on (this replica was deposed).",
)
ZOOKEEPER_CONNECTION_STATE = Enum(
    "sparkpoint_zookeeper_connection_state",
    "State of this process' ZooKeeper session.",
    states=["connected", "suspended", "lost"],
)
STORE_RECOVERY_DURATION = Histogram(
    "sparkpoint_store_recovery_duration_seconds",
    "Time to read a job's completed-checkpoint store from ZooKeeper.",
    buckets=_DURATION_BUCKETS,
)
STORE_UNREADABLE_POINTERS = Counter(
    "sparkpoint_store_unreadable_pointers_total",
    "Checkpoint pointers skipped on recovery because they could not be decoded.",
    ["job_id"],
)

# --- checkpoints, per job -----------------------------------------------------------------
CHECKPOINTS_TRIGGERED = Counter(
    "sparkpoint_checkpoints_triggered_total", "Checkpoints triggered.", ["job_id"]
)
CHECKPOINTS_COMPLETED = Counter(
    "sparkpoint_checkpoints_completed_total", "Checkpoints completed.", ["job_id"]
)
CHECKPOINTS_FAILED = Counter(
    "sparkpoint_checkpoints_failed_total", "Checkpoints that failed or were declined.", ["job_id"]
)
CHECKPOINTS_EXPIRED = Counter(
    "sparkpoint_checkpoints_expired_total", "Checkpoints aborted by their timeout.", ["job_id"]
)
PENDING_CHECKPOINTS = Gauge(
    "sparkpoint_pending_checkpoints", "Checkpoints triggered and not yet finished.", ["job_id"]
)
CHECKPOINT_DURATION = Histogram(
    "sparkpoint_checkpoint_duration_seconds",
    "End-to-end checkpoint duration, trigger to completion.",
    ["job_id"],
    buckets=_DURATION_BUCKETS,
)
CHECKPOINT_FINALIZE_DURATION = Histogram(
    "sparkpoint_checkpoint_finalize_duration_seconds",
    "Coordinator-side finalisation: last acknowledgement to durable in ZooKeeper.",
    ["job_id"],
    buckets=_DURATION_BUCKETS,
)
LAST_CHECKPOINT_TIMESTAMP = Gauge(
    "sparkpoint_last_completed_checkpoint_timestamp_seconds",
    "Completion time of the newest completed checkpoint (Unix seconds).",
    ["job_id"],
)
LAST_CHECKPOINT_SIZE = Gauge(
    "sparkpoint_last_completed_checkpoint_size_bytes",
    "Full size of the newest completed checkpoint: every byte of state it references.",
    ["job_id"],
)
LAST_CHECKPOINT_CHECKPOINTED_SIZE = Gauge(
    "sparkpoint_last_completed_checkpoint_checkpointed_size_bytes",
    "Checkpointed size of the newest completed checkpoint: the bytes it wrote itself "
    "(less than the full size when incremental state reuses earlier checkpoints' files).",
    ["job_id"],
)
LAST_CHECKPOINT_ID = Gauge(
    "sparkpoint_last_completed_checkpoint_id",
    "Id of the newest completed checkpoint or savepoint.",
    ["job_id"],
)
CHECKPOINT_INTERVAL = Gauge(
    "sparkpoint_checkpoint_interval_seconds",
    "The job's periodic checkpoint interval (what freshness alerts compare against).",
    ["job_id"],
)
RESTORES = Counter(
    "sparkpoint_restores_total",
    "Restores planned from a completed checkpoint (a driver run starting from state).",
    ["job_id"],
)
RESTORE_FALLBACKS = Counter(
    "sparkpoint_restore_fallbacks_total",
    "Restores that skipped an unreadable checkpoint and fell back to an older one.",
    ["job_id"],
)

# --- orphaned checkpoint directories (the leader's collector), per job ---------------------
ORPHAN_DIRECTORIES = Gauge(
    "sparkpoint_orphan_checkpoint_directories",
    "Checkpoint directories neither retained nor pending, as the leader's last scan found "
    "them (including those still inside the grace period).",
    ["job_id"],
)
ORPHAN_BYTES = Gauge(
    "sparkpoint_orphan_checkpoint_bytes",
    "Bytes in the checkpoint directories counted by sparkpoint_orphan_checkpoint_directories.",
    ["job_id"],
)
ORPHAN_DIRECTORIES_REMOVED = Counter(
    "sparkpoint_orphan_checkpoint_directories_removed_total",
    "Orphaned checkpoint directories the leader deleted.",
    ["job_id"],
)
ORPHAN_BYTES_REMOVED = Counter(
    "sparkpoint_orphan_checkpoint_bytes_removed_total",
    "Bytes in the orphaned checkpoint directories the leader deleted.",
    ["job_id"],
)
ORPHAN_SCAN_FAILURES = Counter(
    "sparkpoint_orphan_scan_failures_total",
    "Scans for orphaned checkpoint directories that failed (storage or ZooKeeper errors).",
    ["job_id"],
)
CLEANUP_QUEUED = Gauge(
    "sparkpoint_cleanup_queued_deletions",
    "Background deletions (subsumed or aborted checkpoints, ended jobs) queued or running "
    "on this coordinator.",
)
DRIVER_PROBES = Counter(
    "sparkpoint_driver_probes_total",
    "Liveness probes of silent driver runs, by verdict: gone (refused: the standby is "
    "granted), alive, or unknown (no answer, or an address this leader cannot judge).",
    ["verdict"],
)
ORPHAN_UNDECODABLE_POINTERS = Gauge(
    "sparkpoint_orphan_undecodable_pointers",
    "Checkpoint pointers in ZooKeeper that the leader's last orphan scan could not decode: "
    "their directories are kept, never collected, until the pointer is readable or removed.",
    ["job_id"],
)
ORPHAN_SCANS = Counter(
    "sparkpoint_orphan_scans_total",
    "Scans for orphaned checkpoint directories this coordinator ran (only while leader).",
)

#: Every metric labelled by ``job_id``: a job's series are removed from each when it ends.
PER_JOB = (
    STORE_UNREADABLE_POINTERS, CHECKPOINTS_TRIGGERED, CHECKPOINTS_COMPLETED, CHECKPOINTS_FAILED,
    CHECKPOINTS_EXPIRED, PENDING_CHECKPOINTS, CHECKPOINT_DURATION, CHECKPOINT_FINALIZE_DURATION,
    LAST_CHECKPOINT_TIMESTAMP, LAST_CHECKPOINT_SIZE, LAST_CHECKPOINT_CHECKPOINTED_SIZE,
    LAST_CHECKPOINT_ID, CHECKPOINT_INTERVAL, RESTORES, RESTORE_FALLBACKS, ORPHAN_DIRECTORIES,
    ORPHAN_BYTES, ORPHAN_DIRECTORIES_REMOVED, ORPHAN_BYTES_REMOVED, ORPHAN_SCAN_FAILURES,
    ORPHAN_UNDECODABLE_POINTERS,
)  # fmt: skip


def remove_job(job_id: str) -> None:
    """Drop a job's series (it ended here: left in place they would report stale values,
    and from a deposed leader, a second copy of the job)."""
    for metric in PER_JOB:
        with contextlib.suppress(KeyError):  # never recorded for this job
            metric.remove(job_id)


# --- pipeline connectors ------------------------------------------------------------------
SOURCE_DEAD_LETTERED = Counter(
    "sparkpoint_source_dead_lettered_total",
    "Messages a queue source moved to its dead-letter queue (undecodable, or without an id).",
    ["source", "reason"],
)

# --- security ----------------------------------------------------------------------------
REST_REFUSALS = Counter(
    "sparkpoint_rest_refusals_total",
    "REST calls refused for security reasons: unauthenticated, invalid_token, forbidden, "
    "savepoint_target.",
    ["reason"],
)
# Every reason is exported from the start (at 0), so a rate() over it is never empty.
for _reason in ("unauthenticated", "invalid_token", "forbidden", "savepoint_target"):
    REST_REFUSALS.labels(_reason)
