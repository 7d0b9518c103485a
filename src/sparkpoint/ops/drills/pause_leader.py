"""``drill pause-leader``: the zombie. The leader is frozen (SIGSTOP) for three takeover
timeouts, so a follower takes over while it sleeps, then thawed (SIGCONT). On waking it
must act on nothing: its lease lapsed by its own clock, its first write (the overdue
renewal) is refused by the fence and counted, and it steps down to follower."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

import httpx

from sparkpoint.ops.drills.cluster import DrillError, Target
from sparkpoint.ops.drills.invariants import (
    Invariant,
    check_ids_rising,
    check_single_leader,
)
from sparkpoint.ops.drills.kill_leader import first_after, steady
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import DrillReport, IterationResult

FENCED_METRIC = "sparkpoint_fenced_writes_total"
DEADLINE_S = 90.0


def fenced_writes(address: str) -> float | None:
    """The replica's fenced-write count from its /metrics (summed over labels)."""
    try:
        text = httpx.get(f"{address}/metrics", timeout=2.0).text
    except httpx.HTTPError:
        return None
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(FENCED_METRIC))  # fmt: skip


def this_state(address: str) -> str | None:
    try:
        return str(httpx.get(f"{address}/v1/leader", timeout=1.0).json()["this"]["state"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


def run_pause_leader(
    target: Target,
    observer: ClusterObserver,
    config: dict[str, object],
    progress: Callable[[IterationResult], None] | None = None,
) -> DrillReport:
    pause = 3 * target.settings.takeover_timeout_s
    report = DrillReport("pause-leader", {**config, "signal": "STOP", "pause_s": pause})
    before = steady(observer, 0, DEADLINE_S)
    victim, epoch, address = before.leader_instance, before.leader_epoch, before.leader_address
    assert victim is not None and epoch is not None and address is not None
    if not target.can_signal(victim):
        raise DrillError(f"cannot signal the leader {victim!r} from here")
    fenced_before = fenced_writes(address) or 0.0
    max_before = max((cid for cid, _ in before.completions), default=0)
    first_sample = len(before.samples)
    frozen_at = observer.elapsed()
    target.signal(victim, signal.SIGSTOP)
    threading.Event().wait(pause)  # the freeze is the fault under test
    thawed_at = observer.elapsed()
    target.signal(victim, signal.SIGCONT)

    def settled(o: Observation) -> Observation | None:
        _, _, ckpt = first_after(o, epoch, max_before, frozen_at)
        if ckpt is None or not any(at >= thawed_at for _, at in o.completions):
            return None  # the new leader's first checkpoint, and one after the thaw too
        fenced = fenced_writes(address)
        state = this_state(address)
        return o if fenced is not None and fenced > fenced_before and state == "follower" else None

    found = observer.wait_for(settled, DEADLINE_S)
    obs = found if isinstance(found, Observation) else observer.snapshot()
    leader_at, new_epoch, ckpt_at = first_after(obs, epoch, max_before, frozen_at)
    fenced_after = fenced_writes(address)
    state_after = this_state(address)
    after_thaw = [s for s in obs.samples if s.at_s >= thawed_at]
    zombie_acted = [round(s.at_s, 2) for s in after_thaw if victim in s.acting]
    result = IterationResult(
        1, f"SIGSTOP {victim} for {pause:g} s",
        time_to_leader_s=None if leader_at is None else leader_at - frozen_at,
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - frozen_at,
        old_epoch=epoch, new_epoch=new_epoch, new_leader=obs.leader_instance,
        notes={"fenced_writes_before": fenced_before, "fenced_writes_after": fenced_after,
               "zombie_state_after": state_after},
    )  # fmt: skip
    result.invariants = [
        check_single_leader(obs.samples[first_sample:]),
        check_ids_rising([cid for cid, _ in obs.completions]),
        Invariant("taken_over_while_frozen", leader_at is not None and leader_at < thawed_at,
                  f"new term {new_epoch} seen {leader_at and leader_at - frozen_at:.2f} s "
                  "after the freeze" if leader_at is not None else "no new leader"),
        Invariant("zombie_never_acted", not zombie_acted,
                  f"acting at {zombie_acted[:5]}" if zombie_acted
                  else f"{len(after_thaw)} samples after the thaw"),
        Invariant("zombie_write_fenced",
                  fenced_after is not None and fenced_after > fenced_before,
                  f"{FENCED_METRIC} {fenced_before:g} → {fenced_after}"),
        Invariant("zombie_stepped_down", state_after == "follower", f"state {state_after}"),
    ]  # fmt: skip
    report.iterations.append(result)
    if progress is not None:
        progress(result)
    return report
