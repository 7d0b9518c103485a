"""The drills' invariants as pure functions of what was observed (no I/O), so each can be
tested on hand-made histories — including ones that break it.

Each check returns an :class:`Invariant`: its name, whether it held, and what broke it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

SINGLE_LEADER = "single_leader"
IDS_RISING = "ids_strictly_rising"
RETAINED_KEPT = "no_retained_checkpoint_lost"
EXACTLY_ONCE = "exactly_once_output"


@dataclass(frozen=True, slots=True)
class Invariant:
    name: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class LeaderSample:
    """One look at the cluster: the epoch in a valid ``leader/info`` (None: no leader) and
    the replicas that said, each in its own ``GET /v1/leader``, that they lead *and can act*
    (state ``leader`` and ready: a leader whose lease lapsed or whose connection is
    suspended is not ready, so it cannot trigger or complete anything)."""

    at_s: float
    epoch: int | None
    acting: tuple[str, ...] = field(default_factory=tuple)


def check_single_leader(samples: Sequence[LeaderSample]) -> Invariant:
    """At most one acting leader in every sample, and the published epoch never goes back
    (a lower epoch after a higher one would mean a deposed leader published again)."""
    problems: list[str] = []
    highest: int | None = None
    for s in samples:
        if len(s.acting) > 1:
            problems.append(f"t={s.at_s:.2f}s: {len(s.acting)} acting leaders {list(s.acting)}")
        if s.epoch is not None:
            if highest is not None and s.epoch < highest:
                problems.append(f"t={s.at_s:.2f}s: epoch {s.epoch} after epoch {highest}")
            highest = s.epoch if highest is None else max(highest, s.epoch)
    return _result(SINGLE_LEADER, problems, f"{len(samples)} samples")


def check_ids_rising(ids_in_completion_order: Sequence[int]) -> Invariant:
    """Checkpoint ids, in the order their completions were first seen, rise strictly and
    none appears twice. Two leaders acting at once (the thing fencing rules out) would show
    as an id issued twice or a completion below one already seen."""
    problems: list[str] = []
    twice = sorted(i for i, n in Counter(ids_in_completion_order).items() if n > 1)
    if twice:
        problems.append(f"ids completed more than once: {twice[:10]}")
    for before, after in pairwise(ids_in_completion_order):
        if after <= before:
            problems.append(f"id {after} completed after id {before}")
    return _result(IDS_RISING, problems, f"{len(ids_in_completion_order)} completions")


def check_retained_kept(before: Iterable[int], after: Iterable[int]) -> Invariant:
    """Every checkpoint retained before the failure is still retained afterwards, or was
    subsumed by a newer retained one (retention drops the oldest only when a newer one is
    added). A retained checkpoint vanishing with nothing newer is a lost checkpoint."""
    after_set = set(after)
    newest = max(after_set, default=None)
    lost = sorted(
        cid for cid in set(before) if cid not in after_set and (newest is None or newest <= cid)
    )
    problems = [f"retained checkpoints lost: {lost}"] if lost else []
    return _result(
        RETAINED_KEPT, problems, f"before {sorted(set(before))}, after {sorted(after_set)}"
    )


def check_exactly_once(committed: Sequence[str], expected: Sequence[str]) -> Invariant:
    """The sink's committed lines equal, as a multiset, the lines the pipeline's offline
    function computes from the input it consumed: nothing lost, nothing twice."""
    have, want = Counter(committed), Counter(expected)
    missing, extra = want - have, have - want
    problems = []
    if missing:
        problems.append(f"{sum(missing.values())} expected lines missing")
    if extra:
        problems.append(f"{sum(extra.values())} lines extra or duplicated")
    return _result(EXACTLY_ONCE, problems, f"{len(committed)} committed, {len(expected)} expected")


def _result(name: str, problems: list[str], summary: str) -> Invariant:
    if problems:
        shown = "; ".join(problems[:5]) + (
            f"; … {len(problems) - 5} more" if len(problems) > 5 else ""
        )
        return Invariant(name, False, shown)
    return Invariant(name, True, summary)
