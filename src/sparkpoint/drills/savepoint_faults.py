"""The chaos drill's savepoints in the middle of its kills: an intermediate savepoint
(the job goes on) taken through the REST API, then — as soon as the driver heard it
complete — the driver killed (``savepoint-then-driver-kill``) or the leader killed
(``savepoint-then-leader-kill``), both with SIGKILL.

A savepoint is a cut like a checkpoint: if the sink commits at it, the restart must not
replay what that commit made visible. The savepoint is triggered just after a checkpoint
completed, so its cut is a later one, and the driver killed the moment it heard the
savepoint complete: the latest checkpoint then lies before it. The drill's output checks
say whether anything was replayed: each line of the committed output once after the
iteration (once the restarted driver committed at a checkpoint of its own), and exactly
once at the end."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.drills.cluster import LocalCluster
from sparkpoint.drills.job_faults import poll_until
from sparkpoint.drills.workload import DriverProcess, completions

SAVEPOINT_DRIVER_KILL = "savepoint-then-driver-kill"
SAVEPOINT_LEADER_KILL = "savepoint-then-leader-kill"
SAVEPOINT_FAULTS = (SAVEPOINT_DRIVER_KILL, SAVEPOINT_LEADER_KILL)


@dataclass(frozen=True, slots=True)
class Savepoint:
    checkpoint_id: int | None
    #: ``completed``, ``aborted: <reason>``, ``not taken: <why>``, ``no answer``.
    outcome: str

    def describe(self) -> str:
        return f"savepoint {self.checkpoint_id} {self.outcome}"


def take_savepoint(target: LocalCluster, pipeline: DriverProcess, deadline_s: float) -> Savepoint:
    """Trigger an intermediate savepoint and wait until the driver heard its outcome.

    It is triggered as soon as the driver heard a checkpoint complete: its cut then
    comes after that checkpoint's, so the output it commits is output the latest
    checkpoint does not cover until the next one completes."""
    heard_before = len(completions(pipeline.notices()))
    poll_until(lambda: len(completions(pipeline.notices())) > heard_before, deadline_s)
    try:
        with CoordinatorClient(target.addresses(), timeout_s=10.0, retry_for_s=60.0) as client:
            savepoint_id = client.trigger_savepoint(pipeline.job_id, None, stop=False)
    except ClientError as exc:
        return Savepoint(None, f"not taken: {exc}")

    def heard() -> dict[str, object] | None:
        return next((n for n in pipeline.notices() if n.get("checkpoint_id") == savepoint_id
                     and n.get("type") in ("complete", "abort")), None)  # fmt: skip

    if not poll_until(heard, deadline_s):
        return Savepoint(savepoint_id, "no answer")
    notice = heard() or {}
    if notice.get("type") == "complete":
        # Killed only once the driver reported an epoch after hearing it: it has acted
        # on the completion (committed, where its sink commits at savepoints).
        heard_at = float(str(notice.get("time", 0)))
        poll_until(lambda: any(r.get("pid") == notice.get("pid") and r.get("time", 0) > heard_at
                               for r in pipeline.reports()), deadline_s)  # fmt: skip
        return Savepoint(savepoint_id, "completed")
    return Savepoint(savepoint_id, f"aborted: {notice.get('reason')}")


def wait_committed_after_restart(pipeline: DriverProcess, deadline_s: float) -> bool:
    """Wait until the running driver reports an epoch after a completed checkpoint: it
    has committed at it, so what the restore replayed is in the output to be checked."""
    proc = pipeline.proc
    return proc is not None and poll_until(
        lambda: any(r.get("pid") == proc.pid and r.get("last_completed") is not None
                    for r in pipeline.reports()), deadline_s)  # fmt: skip
