"""State assignment at any parallelism: nothing lost, nothing duplicated, balanced."""

from __future__ import annotations

import doctest
import pickle
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkpoint.checkpoint import (
    DistributionMode,
    JobGraph,
    KeyGroupsStateHandle,
    OperatorSpec,
    OperatorStateHandle,
    StateMetaInfo,
)
from sparkpoint.recovery import assignment, plan_restore
from sparkpoint.recovery.plan import RestorePlan
from sparkpoint.recovery.reader import read_operator_state, read_subtask_keyed_state
from sparkpoint.statefiles.keygroups import (
    key_group_for_key,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from tests.recovery.support import (
    InlineOutput,
    checkpoint_of,
    keyed_operator_state,
    list_operator_state,
)

SPLIT, UNION, BROADCAST = (
    DistributionMode.SPLIT_DISTRIBUTE,
    DistributionMode.UNION,
    DistributionMode.BROADCAST,
)

scalar_keys = st.one_of(
    st.integers(-(10**6), 10**6),
    st.integers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),  # NaN keys never compare equal, so dicts cannot hold them
)
state_strategy = st.dictionaries(
    st.one_of(scalar_keys, st.tuples(st.text(max_size=3), st.integers(0, 50))),
    st.binary(max_size=12),
    max_size=60,
)


@st.composite
def rescale(draw: st.DrawFn) -> tuple[int, int, int]:
    """(max parallelism, old parallelism, new parallelism), with the edges drawn often."""
    max_parallelism = draw(st.one_of(st.integers(1, 300), st.sampled_from([128, 1024, 32768])))
    old = draw(st.one_of(st.integers(1, min(max_parallelism, 40)), st.just(max_parallelism)))
    new = draw(
        st.one_of(
            st.just(1),
            st.just(max_parallelism),
            st.just(old),
            st.integers(1, min(max_parallelism, 60)),
        )
    )
    return max_parallelism, old, new


def _graph(uid: str, parallelism: int, max_parallelism: int, *more: OperatorSpec) -> JobGraph:
    return JobGraph("job", (OperatorSpec(uid, parallelism, max_parallelism, keyed=True), *more))


@settings(max_examples=60, deadline=None)
@given(rescale(), state_strategy)
def test_every_key_lands_once_on_the_subtask_its_key_group_names(
    scale: tuple[int, int, int], state: dict[Any, bytes]
) -> None:
    max_parallelism, old, new = scale
    if old > 64 or new > 64:
        # Thousands of subtasks make each example slow; the edges stay covered via 1 and M
        # when M is small.
        old, new = min(old, 64), min(new, 64)
    cp = checkpoint_of(keyed_operator_state("count", state, max_parallelism, old, InlineOutput))
    plan = plan_restore(cp, _graph("count", new, max_parallelism))
    op = plan.operators["count"]
    assert op.parallelism == new and op.old_parallelism == old

    seen: Counter[bytes] = Counter()
    restored: dict[Any, bytes] = {}
    for subtask in op.subtasks:
        expected_range = key_group_range_for_subtask(max_parallelism, new, subtask.index)
        assert subtask.key_group_range == expected_range
        for handle in subtask.keyed:
            # Cut without re-validation by the planner: must equal a validated cut.
            assert handle.key_group_range.intersection(expected_range) == handle.key_group_range
            rebuilt = KeyGroupsStateHandle(handle.key_group_range, handle.offsets, handle.stream)
            assert rebuilt == handle
            old_handle = next(
                h
                for s in cp.operator_states["count"].subtask_states.values()
                for h in s.keyed
                if h.stream == handle.stream
            )
            assert old_handle.intersection(handle.key_group_range) == handle
        for key_group, key, value in read_subtask_keyed_state(
            subtask, max_parallelism=max_parallelism
        ):
            assert key_group == key_group_for_key(key, max_parallelism)
            assert subtask_for_key_group(max_parallelism, new, key_group) == subtask.index
            seen[repr((type(key), key))] += 1  # type: ignore[index]
            restored[key] = value
    assert restored == state
    assert all(count == 1 for count in seen.values())


@settings(max_examples=30, deadline=None)
@given(rescale(), state_strategy)
def test_plan_survives_json(scale: tuple[int, int, int], state: dict[Any, bytes]) -> None:
    max_parallelism, old, new = (scale[0], min(scale[1], 16), min(scale[2], 16))
    cp = checkpoint_of(keyed_operator_state("count", state, max_parallelism, old, InlineOutput))
    plan = plan_restore(cp, _graph("count", new, max_parallelism))
    again = RestorePlan.from_json(plan.to_json())
    assert again == plan
    # Plans and their parts are pickled to reach Spark executors.
    assert pickle.loads(pickle.dumps(plan)) == plan
    last = plan.subtask("count", new - 1)
    assert pickle.loads(pickle.dumps(last)) == last
    assert again.subtask("count", new - 1).keyed == plan.subtask("count", new - 1).keyed


@st.composite
def operator_states(draw: st.DrawFn) -> tuple[int, int, dict[int, dict[str, Any]]]:
    old = draw(st.integers(1, 12))
    new = draw(st.one_of(st.just(1), st.just(old), st.integers(1, 20)))
    names = draw(
        st.dictionaries(
            st.text("abcdef", min_size=1, max_size=3),
            st.sampled_from([SPLIT, UNION, BROADCAST]),
            min_size=1,
            max_size=5,
        )
    )
    per_subtask: dict[int, dict[str, Any]] = {}
    broadcast_copy = {
        name: [f"{name}/b{j}".encode() for j in range(draw(st.integers(0, 3)))]
        for name, mode in names.items()
        if mode is BROADCAST
    }
    for i in range(old):
        states: dict[str, Any] = {}
        for name, mode in names.items():
            if mode is BROADCAST:
                states[name] = (mode, broadcast_copy[name])
            else:
                count = draw(st.integers(0, 7))
                states[name] = (mode, [f"{name}/{i}/{j}".encode() for j in range(count)])
        per_subtask[i] = states
    return old, new, per_subtask


@settings(max_examples=100, deadline=None)
@given(operator_states())
def test_operator_state_split_union_broadcast(case: tuple[int, int, dict[int, Any]]) -> None:
    old, new, per_subtask = case
    cp = checkpoint_of(list_operator_state("src", per_subtask, 128, old, InlineOutput))
    plan = plan_restore(cp, JobGraph("job", (OperatorSpec("src", new, 128),)))
    received = [read_operator_state(s.operator) for s in plan.operators["src"].subtasks]
    for subtask in plan.operators["src"].subtasks:
        for handle in subtask.operator:
            # Built unchecked by the planner: must pass the checking constructor.
            checked = {n: StateMetaInfo(i.offsets, i.mode) for n, i in handle.states.items()}
            assert OperatorStateHandle(checked, handle.stream) == handle
    modes = {name: mode for states in per_subtask.values() for name, (mode, _) in states.items()}
    for name, mode in modes.items():
        every = [e for states in per_subtask.values() for e in states[name][1]]
        got = [r.get(name, []) for r in received]
        if mode is SPLIT:
            assert Counter(e for part in got for e in part) == Counter(every)
            if old == new:  # unchanged parallelism: each keeps its own, balanced or not
                assert got == [per_subtask[i][name][1] for i in range(new)]
            else:
                sizes = [len(part) for part in got]
                assert max(sizes) - min(sizes) <= 1
        elif mode is UNION:
            assert all(Counter(part) == Counter(every) for part in got)
        else:
            assert all(part == per_subtask[0][name][1] for part in got)


def test_split_remainders_rotate_across_state_names() -> None:
    # Five states of one element each, three new subtasks: Flink's rotation gives 2/2/1,
    # not 5/0/0 (every state's one element on subtask 0).
    states = {f"s{n}": (SPLIT, [f"s{n}".encode()]) for n in range(5)}
    cp = checkpoint_of(list_operator_state("src", {0: states}, 128, 1, InlineOutput))
    plan = plan_restore(cp, JobGraph("job", (OperatorSpec("src", 3, 128),)))
    counts = [
        sum(len(v) for v in read_operator_state(s.operator).values())
        for s in plan.operators["src"].subtasks
    ]
    assert sorted(counts) == [1, 2, 2]


def test_split_runs_stay_contiguous() -> None:
    elements = [str(i).encode() for i in range(10)]
    cp = checkpoint_of(
        list_operator_state("src", {0: {"offsets": (SPLIT, elements)}}, 128, 1, InlineOutput)
    )
    plan = plan_restore(cp, JobGraph("job", (OperatorSpec("src", 3, 128),)))
    parts = [
        read_operator_state(s.operator).get("offsets", []) for s in plan.operators["src"].subtasks
    ]
    assert parts == [elements[0:4], elements[4:7], elements[7:10]]


def test_unchanged_parallelism_keeps_the_old_assignment() -> None:
    state = {f"k{i}": str(i).encode() for i in range(200)}
    keyed = keyed_operator_state("count", state, 128, 4, InlineOutput)
    plan = plan_restore(checkpoint_of(keyed), _graph("count", 4, 128))
    for i in range(4):
        assert plan.subtask("count", i).keyed == keyed.subtask_states[i].keyed


def test_keyed_handles_keep_their_offsets() -> None:
    state = {i: b"v" for i in range(500)}
    keyed = keyed_operator_state("count", state, 20, 2, InlineOutput)
    plan = plan_restore(checkpoint_of(keyed), _graph("count", 3, 20))
    # Seed 003's example: old [0,9] [10,19] → new [0,6] [7,13] [14,19]; new subtask 1
    # reads groups 7-9 of old handle 0 and 10-13 of old handle 1, at their old offsets.
    middle = plan.subtask("count", 1)
    old0, old1 = (keyed.subtask_states[i].keyed[0] for i in (0, 1))
    assert [str(h.key_group_range) for h in middle.keyed] == ["[7, 9]", "[10, 13]"]
    assert middle.keyed[0].offsets == old0.offsets[7:10]
    assert middle.keyed[1].offsets == old1.offsets[0:4]
    assert middle.keyed[0].stream == old0.stream


def test_operators_without_state_get_nothing() -> None:
    keyed = keyed_operator_state("count", {"a": b"1"}, 128, 2, InlineOutput)
    graph = JobGraph(
        "job",
        (
            OperatorSpec("source", 3, 128),
            OperatorSpec("count", 2, 128, keyed=True),
            OperatorSpec("sink", 5, 256),
        ),
    )
    plan = plan_restore(checkpoint_of(keyed), graph)
    assert list(plan.operators) == ["source", "count", "sink"]
    for uid in ("source", "sink"):
        op = plan.operators[uid]
        assert op.old_parallelism is None and not op.has_state
        assert [s.index for s in op.subtasks] == list(range(graph.operator(uid).parallelism))
    assert plan.operators["sink"].subtasks[4].key_group_range == key_group_range_for_subtask(
        256, 5, 4
    )


def test_docstring_examples() -> None:
    assert doctest.testmod(assignment).failed == 0


def test_planning_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    keyed = keyed_operator_state("count", {"a": b"1"}, 128, 2, InlineOutput)
    assert gc.isenabled()
    plan_restore(checkpoint_of(keyed), _graph("count", 3, 128))
    assert gc.isenabled()
    gc.disable()
    try:
        plan_restore(checkpoint_of(keyed), _graph("count", 3, 128))
        assert not gc.isenabled()
    finally:
        gc.enable()
