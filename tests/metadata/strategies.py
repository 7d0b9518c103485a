"""Hypothesis strategies for random, valid checkpoints."""

from __future__ import annotations

from hypothesis import strategies as st

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    DistributionMode,
    FileStateHandle,
    InlineStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
    StreamStateHandle,
)

DIRECTORIES = ("/ckpt/job/chk-1/", "hdfs://nn:8020/ckpt/job/chk-1/", "file:///tmp/sp/", "")

job_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,20}\Z")
names = st.text(min_size=1, max_size=12).filter(lambda s: "/" not in s)


@st.composite
def streams(draw: st.DrawFn, size: int | None = None) -> StreamStateHandle:
    if draw(st.booleans()):
        data = draw(st.binary(min_size=size or 0, max_size=size if size is not None else 40))
        return InlineStateHandle(draw(names), data)
    directory = draw(st.sampled_from(DIRECTORIES))
    path = directory + draw(names)
    if not directory and path.startswith("file:"):
        path = "x" + path
    return FileStateHandle(path, size if size is not None else draw(st.integers(0, 2**62)))


@st.composite
def keyed_handles(draw: st.DrawFn, max_parallelism: int) -> KeyGroupsStateHandle:
    start = draw(st.integers(0, max_parallelism))
    end = draw(st.integers(start - 1, min(max_parallelism - 1, start + 70)))
    key_groups = KeyGroupRange(start, end)
    stream = draw(streams())
    offsets = sorted(
        draw(
            st.lists(
                st.integers(0, stream.size),
                min_size=key_groups.num_key_groups,
                max_size=key_groups.num_key_groups,
            )
        )
    )
    return KeyGroupsStateHandle(key_groups, tuple(offsets), stream)


@st.composite
def operator_handles(draw: st.DrawFn) -> OperatorStateHandle:
    stream = draw(streams())
    states = draw(
        st.dictionaries(
            names,
            st.builds(
                StateMetaInfo,
                st.lists(st.integers(0, stream.size), max_size=6).map(tuple),
                st.sampled_from(list(DistributionMode)),
            ),
            max_size=3,
        )
    )
    return OperatorStateHandle(states, stream)


@st.composite
def operator_states(draw: st.DrawFn, uid: str) -> OperatorState:
    max_parallelism = draw(st.sampled_from([1, 7, 128, 32768]))
    parallelism = draw(st.integers(1, min(max_parallelism, 6)))
    indexes = draw(st.sets(st.integers(0, parallelism - 1)))
    subtasks = {
        index: OperatorSubtaskState(
            tuple(draw(st.lists(keyed_handles(max_parallelism), max_size=2))),
            tuple(draw(st.lists(operator_handles(), max_size=2))),
        )
        for index in indexes
    }
    return OperatorState(uid, parallelism, max_parallelism, subtasks)


@st.composite
def checkpoints(draw: st.DrawFn) -> CompletedCheckpoint:
    uids = draw(st.lists(names, unique=True, max_size=3))
    trigger = draw(st.integers(-(2**40), 2**50))
    return CompletedCheckpoint(
        job_id=draw(job_ids),
        checkpoint_id=draw(st.integers(1, 2**63 - 1)),
        kind=draw(st.sampled_from(list(CheckpointKind))),
        trigger_timestamp_ms=trigger,
        completion_timestamp_ms=trigger + draw(st.integers(0, 10**9)),
        operator_states={uid: draw(operator_states(uid)) for uid in uids},
    )
