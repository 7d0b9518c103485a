"""The chaos drill's savepoints in the middle of its kills: an intermediate savepoint
(the job goes on) taken through the REST API, then — as soon as the driver heard it
complete — the driver killed (``savepoint-then-driver-kill``) or the leader killed
(``savepoint-then-leader-kill``), both with SIGKILL.

A savepoint is a cut like a checkpoint: if the sink commits at it, the restart must not
replay what that commit made visible. The drill's output checks say whether it did:
each line of the committed output once after the iteration, and exactly once at the
end."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.drills.cluster import LocalCluster
from sparkpoint.drills.job_faults import poll_until
from sparkpoint.drills.workload import DriverProcess

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
    """Trigger an intermediate savepoint and wait until the driver heard its outcome."""
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
        return Savepoint(savepoint_id, "completed")
    return Savepoint(savepoint_id, f"aborted: {notice.get('reason')}")
