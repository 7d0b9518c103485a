"""Where a failover's time goes: from the fault to the first checkpoint completed by the new
leader, cut into phases by timestamps that several parties record on this machine's clock.

1. ``election``: the fault → the new epoch published (the drill's sampler).
2. ``to_trigger``: → the new leader triggers its first checkpoint (the checkpoint's trigger
   time): the driver re-discovering the leader — a job starts disconnected in a new term
   until its driver's next heartbeat reaches it — and the checkpoint interval.
3. ``delivery``: → the driver receives the trigger (its notice log): heartbeat polling.
4. ``snapshot``: → the last acknowledgement (the leader's checkpoint record): the driver
   waiting for its next epoch boundary, the snapshot job, the acks.
5. ``finalisation``: → completed (`_metadata` written, the store updated).
6. ``observed``: → the drill's sampler saw the pointer (observation delay).

The phases add up to the measured time to the first checkpoint; a phase whose timestamps
are missing (a remote deployment's driver, a record no longer held) is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.ha import HAError

PHASES = ("election", "to_trigger", "delivery", "snapshot", "finalisation", "observed")


def split(boundaries: Sequence[float | None]) -> dict[str, float | None]:
    """Phases from the fault's time and the end of each phase (wall seconds). A missing
    end makes its phase and the next one None; the others stay exact."""
    out: dict[str, float | None] = {}
    for name, start, end in zip(PHASES, boundaries, boundaries[1:], strict=False):
        out[name] = None if start is None or end is None else round(max(end - start, 0.0), 3)
    return out


def checkpoint_record(addresses: list[str], job_id: str, checkpoint_id: int) -> dict[str, Any]:
    """The leader's record of one checkpoint (empty when no leader has it any more)."""
    try:
        with CoordinatorClient(addresses, timeout_s=2.0, retry_for_s=5.0) as client:
            return dict(client.checkpoint(job_id, checkpoint_id))
    except (ClientError, HAError):
        return {}


def failover_phases(
    *,
    fault_wall: float | None,
    leader_wall: float | None,
    observed_wall: float | None,
    checkpoint_id: int | None,
    record: dict[str, Any],
    notices: list[dict[str, Any]],
) -> dict[str, float | None]:
    def ms(key: str) -> float | None:
        value = record.get(key)
        return value / 1000 if isinstance(value, int | float) else None

    delivered = next((float(n["time"]) for n in notices
                      if n.get("type") == "trigger" and n.get("checkpoint_id") == checkpoint_id
                      and isinstance(n.get("time"), int | float)), None)  # fmt: skip
    ends = [ms("trigger_timestamp"), delivered, ms("latest_ack_timestamp"),
            ms("completion_timestamp")]  # fmt: skip
    return split([fault_wall, leader_wall, *ends, observed_wall])


def measure(
    target: Any,
    observer: Any,
    obs: Any,
    fault_at: float,
    leader_at: float | None,
    max_before: int,
) -> dict[str, float | None]:
    """The phases of one failover as observed (``obs``: the observer's snapshot; times on
    its clock)."""
    if leader_at is None:
        return {}
    first = next(((cid, at) for cid, at in obs.completions
                  if cid > max_before and at >= leader_at), None)  # fmt: skip
    if first is None:
        return {}
    cid, observed_at = first
    job_id = target.workload.job_id
    return failover_phases(
        fault_wall=observer.wall(fault_at), leader_wall=observer.wall(leader_at),
        observed_wall=observer.wall(observed_at), checkpoint_id=cid,
        # The leader itself: a follower answers from the store, without acknowledgements.
        record=checkpoint_record([a for a in [obs.leader_address] if a] or target.addresses(),
                                 job_id, cid),
        notices=target.workload.notices(),
    )  # fmt: skip
