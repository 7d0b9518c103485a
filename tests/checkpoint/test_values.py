"""The domain values refuse what contradicts itself and round-trip what they persist."""

from __future__ import annotations

import pytest

from sparkpoint.checkpoint import (
    CheckpointKind,
    CheckpointPointer,
    FileStateHandle,
    InlineStateHandle,
    InvalidCheckpointValue,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorSubtaskState,
    format_checkpoint_id,
    parse_checkpoint_id,
    validate_job_id,
)


def test_checkpoint_id_names_sort_like_ids() -> None:
    ids = [1, 9, 10, 123456789, 2**63 - 1]
    names = [format_checkpoint_id(i) for i in ids]
    assert sorted(names) == names
    assert [parse_checkpoint_id(n) for n in names] == ids
    assert all(len(n) == 19 for n in names)


@pytest.mark.parametrize("bad", [0, -1, 2**63, True, "7"])
def test_checkpoint_id_out_of_range_is_refused(bad: object) -> None:
    with pytest.raises(InvalidCheckpointValue):
        format_checkpoint_id(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "..", "a/b", "-x", "x" * 129, "job id"])
def test_job_id_must_be_safe_as_a_path(bad: str) -> None:
    with pytest.raises(InvalidCheckpointValue, match="job id"):
        validate_job_id(bad)


def test_pointer_round_trips_and_rejects_garbage() -> None:
    pointer = CheckpointPointer(
        job_id="j1",
        checkpoint_id=7,
        kind=CheckpointKind.CHECKPOINT,
        trigger_timestamp_ms=1000,
        completion_timestamp_ms=1250,
        metadata_uri="file:///tmp/cp/j1/chk-7/_metadata",
        state_size=42,
    )
    assert CheckpointPointer.from_bytes(pointer.to_bytes()) == pointer
    assert pointer.duration_ms == 250
    for raw in [b"", b"\xff\xfe", b"[]", b'{"format": 99}', b'{"format": 1}']:
        with pytest.raises(InvalidCheckpointValue):
            CheckpointPointer.from_bytes(raw)


def test_pointer_checkpointed_size_defaults_to_its_full_size_and_never_exceeds_it() -> None:
    pointer = CheckpointPointer(
        "j1", 7, CheckpointKind.CHECKPOINT, 1000, 1250, "file:///cp/j1/chk-7/_metadata", 42
    )
    assert pointer.checkpointed_size == 42  # as every pointer written before it was recorded
    older = {k: v for k, v in pointer.to_dict().items() if k != "checkpointed_size"}
    assert CheckpointPointer.from_dict(older).checkpointed_size == 42
    incremental = CheckpointPointer.from_dict({**older, "checkpointed_size": 5})
    assert (incremental.state_size, incremental.checkpointed_size) == (42, 5)
    assert CheckpointPointer.from_bytes(incremental.to_bytes()) == incremental
    for bad in (43, -2):
        with pytest.raises(InvalidCheckpointValue, match="checkpointed size"):
            CheckpointPointer.from_dict({**older, "checkpointed_size": bad})


def test_key_group_range_intersection_and_keyed_handle_slicing() -> None:
    handle = KeyGroupsStateHandle(KeyGroupRange(0, 3), (0, 10, 10, 25), FileStateHandle("f", 40))
    part = handle.intersection(KeyGroupRange(2, 9))
    assert part is not None
    assert part.key_group_range == KeyGroupRange(2, 3)
    assert part.offsets == (10, 25)
    assert part.offset_of(3) == 25
    assert handle.intersection(KeyGroupRange(4, 9)) is None
    assert KeyGroupRange.empty().is_empty


def test_keyed_handle_offsets_must_match_range() -> None:
    with pytest.raises(InvalidCheckpointValue, match="offsets"):
        KeyGroupsStateHandle(KeyGroupRange(0, 3), (0, 1), InlineStateHandle("x", b"abc"))
    with pytest.raises(InvalidCheckpointValue, match="decrease"):
        KeyGroupsStateHandle(KeyGroupRange(0, 1), (2, 1), InlineStateHandle("x", b"abc"))
    with pytest.raises(InvalidCheckpointValue, match="beyond"):
        KeyGroupsStateHandle(KeyGroupRange(0, 0), (9,), InlineStateHandle("x", b"abc"))


def test_operator_state_checks_indexes_and_key_groups() -> None:
    with pytest.raises(InvalidCheckpointValue, match="subtask index 2"):
        OperatorState("op", 2, 128, {2: OperatorSubtaskState()})
    keyed = KeyGroupsStateHandle(KeyGroupRange(0, 200), (0,) * 201, InlineStateHandle("x", b""))
    with pytest.raises(InvalidCheckpointValue, match="exceed max parallelism"):
        OperatorState("op", 1, 128, {0: OperatorSubtaskState(keyed=(keyed,))})
    with pytest.raises(InvalidCheckpointValue, match="parallelism 300"):
        OperatorState("op", 300, 128, {})
