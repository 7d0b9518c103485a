"""The autoscaler's policy on recorded epochs: scale up when the epochs use more of their
budget than the target over the whole stabilisation window, down when less, one more
while the backlog keeps growing; never on one odd epoch, within the cool-down, outside
the bounds, or when off. Bad settings are refused, naming them."""

from __future__ import annotations

import pytest

from sparkpoint.pipeline.runtime.autoscale_policy import AutoscalePolicy, Observation, decide

ON = AutoscalePolicy(
    enabled=True, min_parallelism=1, max_parallelism=8, target_utilisation=0.5,
    backlog_threshold=1000, stabilisation_window_s=10, cooldown_s=30,
)  # fmt: skip


def epochs(durations: list[float], *, p: int = 4, budget: float = 1.0,
           backlog: list[int] | None = None) -> list[Observation]:  # fmt: skip
    """One epoch a second, ending at 1, 2, … s, with these durations."""
    backlogs = backlog or [None] * len(durations)  # type: ignore[list-item]
    return [Observation(float(i + 1), d, budget, b, p)
            for i, (d, b) in enumerate(zip(durations, backlogs, strict=True))]  # fmt: skip


def test_busy_epochs_over_the_window_scale_up_to_the_target() -> None:
    seen = epochs([0.9, 0.8, 0.85, 0.9, 0.8, 0.9, 0.85, 0.8, 0.9, 0.9, 0.85])
    decision = decide(ON, seen, now_s=11.0)
    # 4 subtasks at 80-90 % of the budget: at least 4 * 0.8 / 0.5 = 6.4 → 7 for 50 %.
    assert decision.parallelism == 7
    assert decision.reason.startswith("scale up 4 → 7") and "target 50%" in decision.reason


def test_idle_epochs_scale_down_as_the_busiest_of_the_window_allows() -> None:
    seen = epochs([0.1, 0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    decision = decide(ON, seen, now_s=11.0)
    assert decision.parallelism == 2  # the 0.2 epoch: 4 * 0.2 / 0.5 = 1.6 → 2
    assert decision.reason.startswith("scale down 4 → 2")


def test_one_odd_epoch_or_a_short_window_changes_nothing() -> None:
    steady = [0.5] * 11
    assert decide(ON, epochs(steady), now_s=11.0).parallelism is None
    spiky = [*steady[:5], 0.1, *steady[6:]]  # one idle epoch: the window must agree
    assert decide(ON, epochs(spiky), now_s=11.0).parallelism is None
    decision = decide(ON, epochs([0.9, 0.9, 0.9]), now_s=3.0)
    assert decision.parallelism is None and "not enough epochs" in decision.reason


def test_a_growing_backlog_asks_for_one_more() -> None:
    backlog = [900, 1200, 1500, 1800, 2100, 2400, 2700, 3000, 3300, 3600, 3900]
    decision = decide(ON, epochs([0.5] * 11, backlog=backlog), now_s=11.0)
    assert decision.parallelism == 5 and "backlog grew to 3900" in decision.reason
    shrinking = list(reversed(backlog))
    assert decide(ON, epochs([0.5] * 11, backlog=shrinking), now_s=11.0).parallelism is None


def test_bounds_cooldown_and_off() -> None:
    busy = epochs([1.0] * 11)
    assert decide(ON, busy, now_s=11.0).parallelism == 8  # 4 * 1.0 / 0.5 = 8, the max
    capped = AutoscalePolicy(**{**_fields(ON), "max_parallelism": 6})
    assert decide(capped, busy, now_s=11.0).parallelism == 6
    cooling = decide(ON, busy, now_s=11.0, last_rescale_s=0.0)
    assert cooling.parallelism is None and "cooling down" in cooling.reason
    assert decide(AutoscalePolicy(), busy, now_s=11.0).reason == "autoscaling is off"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"target utilisation 1\.5"):
        AutoscalePolicy(target_utilisation=1.5)
    with pytest.raises(ValueError, match=r"bounds 4\.\.2"):
        AutoscalePolicy(min_parallelism=4, max_parallelism=2)


def _fields(policy: AutoscalePolicy) -> dict[str, object]:
    return {name: getattr(policy, name) for name in policy.__dataclass_fields__}
