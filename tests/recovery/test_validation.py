"""Validation against the new job graph: each rule, its message, and what passes."""

from __future__ import annotations

import pytest

from sparkpoint.checkpoint import (
    DistributionMode,
    JobGraph,
    OperatorSpec,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
)
from sparkpoint.recovery import RestoreRule, RestoreValidationError, plan_restore
from tests.recovery.support import (
    InlineOutput,
    checkpoint_of,
    keyed_operator_state,
    list_operator_state,
)


def _checkpoint():  # type: ignore[no-untyped-def]
    keyed = keyed_operator_state("count", {"a": b"1", "b": b"2"}, 128, 2, InlineOutput)
    source = list_operator_state(
        "source",
        {0: {"offsets": (DistributionMode.SPLIT_DISTRIBUTE, [b"p0:10"])}},
        16,
        1,
        InlineOutput,
    )
    empty = OperatorState("map", 2, 128, {0: OperatorSubtaskState(), 1: OperatorSubtaskState()})
    return checkpoint_of(keyed, source, empty, checkpoint_id=42)


def _graph(*ops: OperatorSpec) -> JobGraph:
    return JobGraph("clicks", ops)


def test_a_missing_operator_with_state_is_refused_naming_it_and_the_rule() -> None:
    graph = _graph(OperatorSpec("count", 2, 128, keyed=True), OperatorSpec("map", 2, 128))
    with pytest.raises(RestoreValidationError) as caught:
        plan_restore(_checkpoint(), graph)
    error = caught.value
    assert [(v.operator_uid, v.rule) for v in error.violations] == [
        ("source", RestoreRule.OPERATOR_MISSING)
    ]
    assert str(error) == (
        "checkpoint 42 cannot be restored into job 'clicks': 1 problem\n"
        "  operator 'source' [operator-missing]: it has state in the checkpoint but is not in "
        "the new job graph; restore with allow_non_restored_state to drop that state"
    )


def test_allow_non_restored_state_drops_it_and_says_so() -> None:
    graph = _graph(OperatorSpec("count", 3, 128, keyed=True))
    plan = plan_restore(_checkpoint(), graph, allow_non_restored_state=True)
    assert list(plan.operators) == ["count"]
    assert set(plan.non_restored) == {"source", "map"}


def test_an_operator_without_state_may_go_away() -> None:
    # "map" checkpointed nothing, so removing it loses nothing (Flink does the same).
    graph = _graph(OperatorSpec("count", 2, 128, keyed=True), OperatorSpec("source", 1, 16))
    plan = plan_restore(_checkpoint(), graph)
    assert plan.non_restored == ("map",)


def test_parallelism_above_the_state_max_parallelism_is_refused() -> None:
    graph = _graph(
        OperatorSpec("count", 2, 128, keyed=True),
        OperatorSpec("source", 17, 32),
        OperatorSpec("map", 2, 128),
    )
    with pytest.raises(RestoreValidationError) as caught:
        plan_restore(_checkpoint(), graph)
    (violation,) = caught.value.violations
    assert violation.operator_uid == "source"
    assert violation.rule is RestoreRule.PARALLELISM_ABOVE_MAX
    assert "new parallelism 17 is above the max parallelism 16" in str(caught.value)


def test_max_parallelism_may_not_change_for_keyed_state() -> None:
    graph = _graph(
        OperatorSpec("count", 2, 256, keyed=True),
        OperatorSpec("source", 1, 16),
        OperatorSpec("map", 2, 128),
    )
    with pytest.raises(RestoreValidationError) as caught:
        plan_restore(_checkpoint(), graph)
    (violation,) = caught.value.violations
    assert (violation.operator_uid, violation.rule) == (
        "count",
        RestoreRule.MAX_PARALLELISM_CHANGED,
    )
    assert "written with max parallelism 128, the new graph asks for 256" in violation.message


def test_max_parallelism_may_change_for_operator_state() -> None:
    graph = _graph(
        OperatorSpec("count", 2, 128, keyed=True),
        OperatorSpec("source", 4, 64),
        OperatorSpec("map", 2, 128),
    )
    plan = plan_restore(_checkpoint(), graph)
    assert plan.operators["source"].max_parallelism == 64


def test_every_violation_is_reported_at_once() -> None:
    graph = _graph(OperatorSpec("count", 2, 512, keyed=True), OperatorSpec("source", 20, 32))
    with pytest.raises(RestoreValidationError) as caught:
        plan_restore(_checkpoint(), graph)
    assert {(v.operator_uid, v.rule) for v in caught.value.violations} == {
        ("count", RestoreRule.MAX_PARALLELISM_CHANGED),
        ("source", RestoreRule.PARALLELISM_ABOVE_MAX),
    }
    assert str(caught.value).startswith(
        "checkpoint 42 cannot be restored into job 'clicks': 2 problems"
    )


def test_a_state_name_with_two_modes_is_refused() -> None:
    stream = InlineOutput("x")
    stream.write(b"\x00\x00\x00\x01a")
    handle = stream.close_and_get_handle()

    def subtask(mode: DistributionMode) -> OperatorSubtaskState:
        return OperatorSubtaskState(
            operator=(OperatorStateHandle({"s": StateMetaInfo((0,), mode)}, handle),)
        )

    state = OperatorState(
        "src",
        2,
        128,
        {0: subtask(DistributionMode.UNION), 1: subtask(DistributionMode.SPLIT_DISTRIBUTE)},
    )
    with pytest.raises(RestoreValidationError) as caught:
        plan_restore(checkpoint_of(state), JobGraph("job", (OperatorSpec("src", 2, 128),)))
    (violation,) = caught.value.violations
    assert violation.rule is RestoreRule.INCONSISTENT_MODE
    assert "state 's' is UNION in one subtask and SPLIT_DISTRIBUTE in subtask 1" in str(violation)
