"""``drill kill-leader``: signal the leader, time the failover, check the invariants,
bring the replica back — N times.

Per iteration: wait until the cluster is steady (one ready leader, a checkpoint completed
since the last iteration), note the leader's epoch and the retained checkpoints, signal
the leader (KILL, TERM, or STOP for ``pause_s`` then CONT), and measure from the signal:
the time until a valid ``leader/info`` with a higher epoch is seen, and until the first
checkpoint completed after that (a new pointer with a higher id, seen no earlier than the
new leader: the old leader cannot complete anything once a newer epoch exists). Then
check the invariants over what was observed and restart (or thaw) the replica.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sparkpoint.ops.drills import phases
from sparkpoint.ops.drills.cluster import DrillError, Target
from sparkpoint.ops.drills.invariants import (
    Invariant,
    check_ids_rising,
    check_retained_kept,
    check_single_leader,
)
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import DrillReport, IterationResult

STABLE_S = 1.0


@dataclass(frozen=True, slots=True)
class KillLeaderOptions:
    iterations: int = 5
    signal: str = "KILL"  # KILL | TERM | STOP
    interval_s: float = 2.0  # pause between iterations, once the cluster is steady again
    pause_s: float | None = None  # STOP: how long the leader stays frozen
    deadline_s: float = 90.0  # for each wait on the cluster


def steady(observer: ClusterObserver, after_completions: int, deadline_s: float) -> Observation:
    """Wait until one leader has been published for a while (the same epoch for
    ``STABLE_S``) and a checkpoint completed after the given count."""

    def ready(o: Observation) -> Observation | None:
        if o.leader_epoch is None or len(o.completions) <= after_completions or not o.samples:
            return None
        recent = [s.epoch for s in o.samples if s.at_s >= o.samples[-1].at_s - STABLE_S]
        settled = o.samples[-1].at_s - o.samples[0].at_s >= STABLE_S
        return o if settled and set(recent) == {o.leader_epoch} else None

    found = observer.wait_for(ready, deadline_s)
    if not isinstance(found, Observation):
        raise DrillError("no leader completing checkpoints (cluster not steady)")
    return found


def first_after(
    obs: Observation, epoch: int, max_id_before: int, since_s: float
) -> tuple[float | None, int | None, float | None]:
    """(time the new epoch was first sampled, its epoch, time of its first completion)."""
    leader_at, new_epoch, first = _first_after(obs, epoch, max_id_before, since_s)
    return leader_at, new_epoch, None if first is None else first[1]


def _first_after(
    obs: Observation, epoch: int, max_id_before: int, since_s: float
) -> tuple[float | None, int | None, tuple[int, float] | None]:
    leader_at = None
    new_epoch = None
    for s in obs.samples:
        if s.at_s >= since_s and s.epoch is not None and s.epoch > epoch:
            leader_at, new_epoch = s.at_s, s.epoch
            break
    if leader_at is None:
        return None, None, None
    for cid, at in obs.completions:
        if cid > max_id_before and at >= leader_at:
            return leader_at, new_epoch, (cid, at)
    return leader_at, new_epoch, None


def triggered_after(target: Target, obs: Observation, checkpoint_id: int, wall: float) -> bool:
    """Whether the leader's record of the checkpoint says it was triggered after ``wall``:
    one the old leader triggered and completed just before the fault may be seen only
    after it — that one is not the new leader's. An unreadable record counts as after."""
    addresses = [a for a in [obs.leader_address] if a] or target.addresses()
    record = phases.checkpoint_record(addresses, target.workload.job_id, checkpoint_id)
    triggered = record.get("trigger_timestamp")
    return not isinstance(triggered, int | float) or triggered / 1000 >= wall


def run_kill_leader(
    target: Target,
    observer: ClusterObserver,
    options: KillLeaderOptions,
    config: dict[str, object],
    progress: Callable[[IterationResult], None] | None = None,
) -> DrillReport:
    sig = signal.Signals[f"SIG{options.signal}"]
    pause = options.pause_s or 3 * target.settings.takeover_timeout_s
    report = DrillReport("kill-leader", {**config, "signal": options.signal,
                         **({"pause_s": pause} if sig == signal.SIGSTOP else {})})  # fmt: skip
    pacing = threading.Event()  # only ever waited on with a timeout: the drill's own pace
    completions = 0
    for n in range(1, options.iterations + 1):
        before = steady(observer, completions, options.deadline_s)
        victim, epoch = before.leader_instance, before.leader_epoch
        assert victim is not None and epoch is not None
        if not target.can_signal(victim):
            raise DrillError(f"cannot signal the leader {victim!r} from here")
        max_before = max((cid for cid, _ in before.completions), default=0)
        first_sample = len(before.samples)
        signalled = time.monotonic() - observer.started
        target.signal(victim, sig)
        if sig == signal.SIGSTOP:
            pacing.wait(pause)  # the pause is the fault under test, not synchronisation
            target.signal(victim, signal.SIGCONT)
        floor = max_before
        while True:
            after = observer.wait_for(
                lambda o, e=epoch, m=floor, t=signalled: (
                    o if first_after(o, e, m, t)[2] is not None else None
                ),
                options.deadline_s,
            )
            obs = after if isinstance(after, Observation) else observer.snapshot()
            leader_at, new_epoch, first = _first_after(obs, epoch, floor, signalled)
            fault_wall = observer.wall(signalled) or 0.0
            if first is None or triggered_after(target, obs, first[0], fault_wall):
                break
            floor = first[0]  # the old leader's last checkpoint, seen late: not a failover's
        ckpt_at = None if first is None else first[1]
        result = IterationResult(
            n, f"SIG{options.signal} {victim}",
            time_to_leader_s=None if leader_at is None else leader_at - signalled,
            time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - signalled,
            old_epoch=epoch, new_epoch=new_epoch, new_leader=obs.leader_instance,
        )  # fmt: skip
        result.phases = phases.measure(target, observer, obs, signalled, leader_at, floor)
        target.restart(victim, options.deadline_s)
        obs = observer.snapshot()
        result.invariants = [
            check_single_leader(obs.samples[first_sample:]),
            check_ids_rising([cid for cid, _ in obs.completions]),
            # After the new leader's first checkpoint (and the restart): everything retained
            # before is still there, or subsumed by something newer.
            check_retained_kept(before.retained, obs.retained),
        ]
        if leader_at is None or ckpt_at is None:
            result.invariants.append(Invariant(
                "failover_completed", False,
                f"no new leader and checkpoint within {options.deadline_s:g} s"))  # fmt: skip
        report.iterations.append(result)
        completions = len(obs.completions)
        if progress is not None:
            progress(result)
        if n < options.iterations:
            pacing.wait(options.interval_s)
    return report
