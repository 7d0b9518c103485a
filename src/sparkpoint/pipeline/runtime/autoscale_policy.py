"""When to rescale a running job by itself: the autoscaler's policy (off by default).
Pure: recorded observations in, a decision with its reason out — no Spark, no
coordinator — so it is tested with recorded inputs. Nothing acts on its decisions yet;
what will is a rescale request like an operator's (``sparkpoint.runs.rescales``).

Each epoch the driver records an :class:`Observation`: how long the epoch took against
its budget (the share of the time it may take, the checkpoint interval by default) and
the source's backlog. The policy's recommendation is the parallelism at which the epochs
would use ``target_utilisation`` of the budget (work scales with the subtasks), raised
by one while the backlog has grown over the whole stabilisation window. A scale-up
follows the lowest recommendation over the window and a scale-down the highest (the
window must agree, so one slow or idle epoch never rescales), within the bounds, and
never within the cool-down after the last rescale.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AutoscalePolicy:
    """The job configuration's autoscaler (``enabled`` False: it never decides)."""

    enabled: bool = False
    min_parallelism: int = 1
    max_parallelism: int = 128
    #: The share of the epoch budget the epochs should use (0 < u <= 1).
    target_utilisation: float = 0.7
    #: A backlog (records) above this that grew over the whole window asks for one more.
    backlog_threshold: int = 10_000
    stabilisation_window_s: float = 60.0
    cooldown_s: float = 120.0

    def __post_init__(self) -> None:
        if not 0 < self.target_utilisation <= 1:
            raise ValueError(
                f"autoscale target utilisation {self.target_utilisation} must be in (0, 1]"
            )
        if not 1 <= self.min_parallelism <= self.max_parallelism:
            raise ValueError(
                f"autoscale bounds {self.min_parallelism}..{self.max_parallelism}: the "
                "minimum must be at least 1 and at most the maximum"
            )
        if self.stabilisation_window_s < 0 or self.cooldown_s < 0:
            raise ValueError("autoscale stabilisation window and cool-down must be >= 0 s")


@dataclass(frozen=True, slots=True)
class Observation:
    """One epoch: when it ended (s, monotonic), its duration and budget (s), the source's
    backlog (records; None when the source cannot tell) and the parallelism it ran at."""

    at_s: float
    epoch_s: float
    budget_s: float
    backlog: int | None
    parallelism: int


@dataclass(frozen=True, slots=True)
class Decision:
    """``parallelism`` None: stay. ``reason`` says why, either way (log, metrics, UI)."""

    parallelism: int | None
    reason: str


def decide(
    policy: AutoscalePolicy,
    observations: Sequence[Observation],
    now_s: float,
    last_rescale_s: float | None = None,
) -> Decision:
    """The decision after ``observations`` (oldest first) at ``now_s``."""
    if not policy.enabled:
        return Decision(None, "autoscaling is off")
    if last_rescale_s is not None and now_s - last_rescale_s < policy.cooldown_s:
        left = policy.cooldown_s - (now_s - last_rescale_s)
        return Decision(None, f"cooling down after the last rescale ({left:.0f} s left)")
    current = observations[-1].parallelism if observations else None
    window = [o for o in observations if now_s - o.at_s <= policy.stabilisation_window_s]
    window = [o for o in window if o.parallelism == current]
    span = window[-1].at_s - window[0].at_s if window else 0.0
    if current is None or len(window) < 2 or span < policy.stabilisation_window_s * 0.9:
        return Decision(None, "not enough epochs at this parallelism in the window yet")
    recommended = [_recommend(policy, o) for o in window]
    backlog_grew = _backlog_grew(policy, window)
    if backlog_grew:
        recommended = [max(r, current + 1) for r in recommended]
    up, down = _bounded(policy, min(recommended)), _bounded(policy, max(recommended))
    utilisation = sum(o.epoch_s / o.budget_s for o in window) / len(window)
    why = f"epochs used {utilisation:.0%} of their budget (target {policy.target_utilisation:.0%})"
    if backlog_grew:
        why += f", backlog grew to {window[-1].backlog} records"
    if up > current:
        return Decision(up, f"scale up {current} → {up}: {why}")
    if down < current:
        return Decision(down, f"scale down {current} → {down}: {why}")
    return Decision(None, f"stay at {current}: {why}")


def _bounded(policy: AutoscalePolicy, parallelism: int) -> int:
    return min(max(parallelism, policy.min_parallelism), policy.max_parallelism)


def _recommend(policy: AutoscalePolicy, o: Observation) -> int:
    """The parallelism at which this epoch's work would use the target share."""
    utilisation = o.epoch_s / o.budget_s if o.budget_s > 0 else 1.0
    return max(1, math.ceil(o.parallelism * utilisation / policy.target_utilisation - 1e-9))


def _backlog_grew(policy: AutoscalePolicy, window: Sequence[Observation]) -> bool:
    backlogs = [o.backlog for o in window]
    if any(b is None for b in backlogs):
        return False
    known = [b for b in backlogs if b is not None]
    rising = all(b2 >= b1 for b1, b2 in itertools.pairwise(known))
    return known[-1] > policy.backlog_threshold and known[-1] > known[0] and rising
