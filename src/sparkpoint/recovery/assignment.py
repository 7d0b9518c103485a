"""State assignment: checkpoint + new job graph → restore plan. Pure, no I/O.

After Flink's StateAssignmentOperation and RoundRobinOperatorStateRepartitioner:

- keyed state: every old handle is cut to each new subtask's key-group range (offsets
  kept, so the reader seeks straight to the groups it owns);
- SPLIT_DISTRIBUTE operator state: per state name, all elements of all old subtasks, in
  order, cut into ``P`` contiguous runs whose lengths differ by at most one; which
  subtasks get the longer runs rotates from one state name to the next, so no subtask
  is always the one that gets more;
- UNION: every new subtask gets every element;
- BROADCAST: new subtask ``i`` gets old subtask ``i mod P_old``'s copy (they are equal);
- parallelism and max parallelism unchanged: every subtask keeps exactly its own keyed,
  SPLIT_DISTRIBUTE and BROADCAST state. UNION state is still the union of all subtasks —
  that is what UNION means, and Flink does the same.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import TypeVar

from sparkpoint.checkpoint import (
    CompletedCheckpoint,
    DistributionMode,
    IncrementalKeyedStateHandle,
    JobGraph,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSpec,
    OperatorState,
    OperatorStateHandle,
    StateMetaInfo,
    StreamStateHandle,
)
from sparkpoint.recovery.plan import OperatorRestore, RestorePlan, SubtaskRestore
from sparkpoint.recovery.validation import has_keyed_state, validate_restore
from sparkpoint.statefiles.keygroups import key_group_range_for_subtask, subtask_for_key_group

_T = TypeVar("_T")

#: (stream, offsets of one state name in it) — a run of operator-state elements.
_Run = tuple[StreamStateHandle, tuple[int, ...]]


def _unchecked(cls: type[_T], **fields: object) -> _T:
    """An instance of the frozen dataclass ``cls`` built without its ``__post_init__``
    checks. Only for values derived from already validated ones — a slice of checked
    offsets, offsets of one stream regrouped — where re-checking every offset of tens of
    thousands of derived handles was most of the planning time. The property tests
    rebuild every planned handle through the checking constructor to keep this honest.
    """
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    return obj


class _OperatorStateBuilder:
    """Collects (stream, name, mode, offsets) for one new subtask; emits one handle per
    stream, in the order streams were first seen (deterministic plans)."""

    def __init__(self) -> None:
        self._streams: dict[StreamStateHandle, dict[str, tuple[DistributionMode, list[int]]]] = {}

    def add(
        self, stream: StreamStateHandle, name: str, mode: DistributionMode, offsets: Iterable[int]
    ) -> None:
        states = self._streams.setdefault(stream, {})
        states.setdefault(name, (mode, []))[1].extend(offsets)

    def build(self) -> tuple[OperatorStateHandle, ...]:
        # Every offset comes from a validated handle of the same stream, so the new
        # handles are valid by construction (see _unchecked).
        return tuple(
            _unchecked(
                OperatorStateHandle,
                states=MappingProxyType(
                    {
                        name: _unchecked(StateMetaInfo, offsets=tuple(offs), mode=mode)
                        for name, (mode, offs) in states.items()
                    }
                ),
                stream=stream,
            )
            for stream, states in self._streams.items()
        )


def _runs_by_name(state: OperatorState) -> dict[str, tuple[DistributionMode, list[list[_Run]]]]:
    """Per state name: its mode and, per old subtask in index order, its runs."""
    out: dict[str, tuple[DistributionMode, list[list[_Run]]]] = {}
    indices = sorted(state.subtask_states)
    for position, index in enumerate(indices):
        for handle in state.subtask_states[index].operator:
            for name, info in handle.states.items():
                _, per_subtask = out.setdefault(name, (info.mode, []))
                while len(per_subtask) <= position:
                    per_subtask.append([])
                per_subtask[position].append((handle.stream, info.offsets))
    return out


def _split_distribute(
    name: str,
    runs: Sequence[_Run],
    builders: Sequence[_OperatorStateBuilder],
    start: int,
) -> int:
    """Cut the elements of ``runs`` into len(builders) contiguous parts; part ``k`` goes
    to subtask ``(k + start) % P``. Returns the start for the next state name."""
    parallelism = len(builders)
    total = sum(len(offsets) for _, offsets in runs)
    base, remainder = divmod(total, parallelism)
    next_start = start
    run_index, within = 0, 0
    for k in range(parallelism):
        target = (k + start) % parallelism
        count = base + (1 if k < remainder else 0)
        if k == remainder:
            # The first subtask that got the shorter run gets a longer one next time.
            next_start = target
        while count > 0:
            stream, offsets = runs[run_index]
            take = min(count, len(offsets) - within)
            builders[target].add(
                stream, name, DistributionMode.SPLIT_DISTRIBUTE, offsets[within : within + take]
            )
            count -= take
            within += take
            if within == len(offsets):
                run_index, within = run_index + 1, 0
    return next_start


def _assign_operator_state(
    state: OperatorState, parallelism: int, unchanged: bool
) -> list[tuple[OperatorStateHandle, ...]]:
    builders = [_OperatorStateBuilder() for _ in range(parallelism)]
    old_indices = sorted(state.subtask_states)
    start = 0
    for name, (mode, per_subtask) in sorted(_runs_by_name(state).items()):
        if mode is DistributionMode.UNION:
            every = [run for runs in per_subtask for run in runs]
            for builder in builders:
                for stream, offsets in every:
                    builder.add(stream, name, mode, offsets)
        elif unchanged:
            # Same parallelism: subtask i keeps what old subtask i had.
            for position, runs in enumerate(per_subtask):
                for stream, offsets in runs:
                    builders[old_indices[position]].add(stream, name, mode, offsets)
        elif mode is DistributionMode.BROADCAST:
            holders = [runs for runs in per_subtask if runs]
            for i, builder in enumerate(builders):
                for stream, offsets in holders[i % len(holders)]:
                    builder.add(stream, name, mode, offsets)
        else:
            every = [run for runs in per_subtask for run in runs]
            start = _split_distribute(name, every, builders, start)
    return [b.build() for b in builders]


def _cut(handle: KeyedStateHandle, overlap: KeyGroupRange) -> KeyedStateHandle:
    """``handle`` restricted to ``overlap`` (non-empty, inside its range): the same as
    ``handle.intersection(overlap)``, without re-validating the sliced offsets."""
    if overlap == handle.key_group_range:
        return handle
    if isinstance(handle, IncrementalKeyedStateHandle):
        cut = handle.intersection(overlap)
        assert cut is not None
        return cut
    first = overlap.start - handle.key_group_range.start
    return _unchecked(
        KeyGroupsStateHandle,
        key_group_range=overlap,
        offsets=handle.offsets[first : first + overlap.num_key_groups],
        stream=handle.stream,
    )


def _assign_keyed_state(
    state: OperatorState,
    max_parallelism: int,
    ranges: Sequence[KeyGroupRange],
    unchanged: bool,
) -> list[list[KeyedStateHandle]]:
    parallelism = len(ranges)
    out: list[list[KeyedStateHandle]] = [[] for _ in range(parallelism)]
    for index in sorted(state.subtask_states):
        for handle in state.subtask_states[index].keyed:
            if unchanged:
                out[index].append(handle)
                continue
            r = handle.key_group_range
            if r.is_empty:
                continue
            # Only the new subtasks whose ranges overlap this handle: linear, not P x P_old.
            first = subtask_for_key_group(max_parallelism, parallelism, r.start)
            last = subtask_for_key_group(max_parallelism, parallelism, r.end)
            for new_index in range(first, last + 1):
                target = ranges[new_index]
                # Inline intersection: this loop runs once per (old handle, new subtask).
                start = target.start if target.start > r.start else r.start
                end = target.end if target.end < r.end else r.end
                if start <= end:
                    out[new_index].append(_cut(handle, KeyGroupRange(start, end)))
    return out


def _assign(spec: OperatorSpec, state: OperatorState | None) -> OperatorRestore:
    # Keyed state keeps the max parallelism it was written with (validation made sure the
    # graph agrees); anything else takes the new graph's.
    max_parallelism = spec.max_parallelism
    if state is not None and has_keyed_state(state):
        max_parallelism = state.max_parallelism
    parallelism = spec.parallelism
    ranges = [
        key_group_range_for_subtask(max_parallelism, parallelism, i) for i in range(parallelism)
    ]
    if state is None:
        return OperatorRestore(
            spec.uid,
            parallelism,
            max_parallelism,
            None,
            tuple(SubtaskRestore(i, ranges[i]) for i in range(parallelism)),
        )
    unchanged = state.parallelism == parallelism and state.max_parallelism == max_parallelism
    keyed = _assign_keyed_state(state, max_parallelism, ranges, unchanged)
    operator = _assign_operator_state(state, parallelism, unchanged)
    return OperatorRestore(
        spec.uid,
        parallelism,
        max_parallelism,
        state.parallelism,
        tuple(
            SubtaskRestore(i, ranges[i], tuple(keyed[i]), operator[i]) for i in range(parallelism)
        ),
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the plan is built.

    A large plan allocates hundreds of thousands of small objects and no reference
    cycles; with the collector running, its full passes over the (equally large)
    checkpoint tripled planning time (bench/recovery_bench.py). Only a collector that was
    enabled is enabled again, so an application that turned it off keeps it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def plan_restore(
    checkpoint: CompletedCheckpoint, new_graph: JobGraph, allow_non_restored_state: bool = False
) -> RestorePlan:
    """Validate ``checkpoint`` against ``new_graph`` and assign its state to the new subtasks.

    Raises :class:`~sparkpoint.recovery.errors.RestoreValidationError` naming every
    operator and rule that forbids the restore. Operators of the new graph that the
    checkpoint does not know start without state.

    >>> from sparkpoint.checkpoint import CheckpointKind
    >>> cp = CompletedCheckpoint("clicks", 7, CheckpointKind.SAVEPOINT, 0, 0, {})
    >>> plan = plan_restore(cp, JobGraph("clicks", (OperatorSpec("count", 3, 128),)))
    >>> [str(s.key_group_range) for s in plan.operators["count"].subtasks]
    ['[0, 42]', '[43, 85]', '[86, 127]']
    """
    result = validate_restore(checkpoint, new_graph, allow_non_restored_state)
    with _collector_paused():
        operators = {
            spec.uid: _assign(spec, checkpoint.operator_states.get(spec.uid))
            for spec in new_graph.operators
        }
    return RestorePlan(
        job_id=new_graph.job_id,
        checkpoint_id=checkpoint.checkpoint_id,
        checkpoint_kind=checkpoint.kind,
        operators=operators,
        non_restored=result.non_restored,
    )
