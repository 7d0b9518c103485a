"""Incremental keyed handles (an embedded store's files) through planning and JSON: a
rescale gives each new subtask the overlapping stores, narrowed to its key groups, with
the files unchanged; unchanged parallelism keeps them as they are."""

from __future__ import annotations

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    JobGraph,
    KeyGroupRange,
    OperatorSpec,
    OperatorState,
    OperatorSubtaskState,
    StoreFile,
)
from sparkpoint.checkpoint.serde import keyed_from_dict, keyed_to_dict
from sparkpoint.recovery import plan_restore
from sparkpoint.statefiles import key_group_range_for_subtask

M = 128


def _store(i: int, p: int) -> IncrementalKeyedStateHandle:
    groups = key_group_range_for_subtask(M, p, i)
    return IncrementalKeyedStateHandle(
        groups,
        groups,
        f"inst{i}",
        (StoreFile("000007.sst", FileStateHandle(f"/c/job/shared/p-inst{i}-000007.sst", 900)),),
        (StoreFile("CURRENT", InlineStateHandle("CURRENT", b"MANIFEST-000009\n")),),
    )


def _checkpoint(p: int) -> CompletedCheckpoint:
    subtasks = {i: OperatorSubtaskState(keyed=(_store(i, p),)) for i in range(p)}
    return CompletedCheckpoint(
        "job", 5, CheckpointKind.CHECKPOINT, 1, 2, {"p": OperatorState("p", p, M, subtasks)}
    )


def test_a_rescale_narrows_the_stores_and_keeps_their_files() -> None:
    plan = plan_restore(_checkpoint(4), JobGraph("job", (OperatorSpec("p", 3, M, keyed=True),)))
    for subtask in plan.operators["p"].subtasks:
        covered = []
        for handle in subtask.keyed:
            assert isinstance(handle, IncrementalKeyedStateHandle)
            old = _store(int(handle.instance[4:]), 4)
            assert (handle.shared, handle.private, handle.store_range) == (
                old.shared,
                old.private,
                old.key_group_range,
            )
            covered.extend(handle.key_group_range)
        assert covered == list(subtask.key_group_range)


def test_unchanged_parallelism_keeps_every_store_whole() -> None:
    plan = plan_restore(_checkpoint(4), JobGraph("job", (OperatorSpec("p", 4, M, keyed=True),)))
    assert [s.keyed for s in plan.operators["p"].subtasks] == [(_store(i, 4),) for i in range(4)]


def test_json_round_trip() -> None:
    handle = _store(1, 4).intersection(KeyGroupRange(40, 50))
    assert handle is not None and handle.key_group_range == KeyGroupRange(40, 50)
    assert keyed_from_dict(keyed_to_dict(handle)) == handle
