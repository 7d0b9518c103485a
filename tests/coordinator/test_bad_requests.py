"""Every bad request is refused with a typed error and changes nothing: not the pending
checkpoint, not the notices, not the store, not the disk."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sparkpoint.checkpoint import (
    InlineStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
)
from sparkpoint.coordinator import (
    Acknowledgement,
    CheckpointFinishedError,
    CoordinatorRequestError,
    DuplicateAcknowledgeError,
    InvalidSubtaskStateError,
    UnexpectedSubtaskError,
    UnknownCheckpointError,
)

from .support import Harness, keyed_state


def _snapshot(h: Harness) -> tuple[object, ...]:
    files = sorted(str(p.relative_to(h.root)) for p in h.root.rglob("*"))
    pending = {
        cid: (
            h.coordinator.pending_checkpoint(cid).acknowledged_subtasks,
            h.coordinator.pending_checkpoint(cid).waiting_for(),
        )
        for cid in h.coordinator.pending_checkpoint_ids()
    }
    return (
        files,
        pending,
        h.store.get_all(),
        h.coordinator.outbox.last_seq,
        h.counter.get(),
        h.coordinator.stats.to_dict(),
    )


@pytest.fixture
def scene(harness: Harness) -> tuple[Harness, int, int]:
    """Checkpoint ``done`` completed, checkpoint ``open`` waiting, op0[0] acknowledged."""
    h = harness
    done = h.trigger_next()
    h.ack_all(done)
    open_ = h.trigger_next()
    h.coordinator.acknowledge(open_, "op0", 0, keyed_state(0, 2))
    return h, done, open_


BAD: dict[str, tuple[type[CoordinatorRequestError], Callable[[Harness, int, int], object]]] = {
    "ack unknown id": (
        UnknownCheckpointError,
        lambda h, done, open_: h.coordinator.acknowledge(999, "op0", 1, keyed_state(1, 2)),
    ),
    "ack completed id": (
        CheckpointFinishedError,
        lambda h, done, open_: h.coordinator.acknowledge(done, "op0", 1, keyed_state(1, 2)),
    ),
    "duplicate ack": (
        DuplicateAcknowledgeError,
        lambda h, done, open_: h.coordinator.acknowledge(open_, "op0", 0, keyed_state(0, 2)),
    ),
    "duplicate inside a batch": (
        DuplicateAcknowledgeError,
        lambda h, done, open_: h.coordinator.acknowledge_all(
            open_,
            [
                Acknowledgement("op0", 1, keyed_state(1, 2)),
                Acknowledgement("op0", 1, keyed_state(1, 2)),
            ],
        ),
    ),
    "unknown operator": (
        UnexpectedSubtaskError,
        lambda h, done, open_: h.coordinator.acknowledge(open_, "nope", 0, OperatorSubtaskState()),
    ),
    "subtask out of range": (
        UnexpectedSubtaskError,
        lambda h, done, open_: h.coordinator.acknowledge(open_, "op0", 2, OperatorSubtaskState()),
    ),
    "batch with one bad ack": (
        UnexpectedSubtaskError,
        lambda h, done, open_: h.coordinator.acknowledge_all(
            open_,
            [
                Acknowledgement("op0", 1, keyed_state(1, 2)),
                Acknowledgement("op1", 0, keyed_state(0, 3)),
                Acknowledgement("op1", 7, keyed_state(0, 3)),
            ],
        ),
    ),
    "state beyond max parallelism": (
        InvalidSubtaskStateError,
        lambda h, done, open_: h.coordinator.acknowledge(
            open_,
            "op0",
            1,
            OperatorSubtaskState(
                keyed=(
                    KeyGroupsStateHandle(
                        KeyGroupRange(127, 200), (0,) * 74, InlineStateHandle("x", b"")
                    ),
                )
            ),
        ),
    ),
    "state of the wrong type": (
        InvalidSubtaskStateError,
        lambda h, done, open_: h.coordinator.acknowledge(open_, "op0", 1, b"bytes"),  # type: ignore[arg-type]
    ),
    "ack with a non-integer id": (
        UnknownCheckpointError,
        lambda h, done, open_: h.coordinator.acknowledge("1", "op0", 1, keyed_state(1, 2)),  # type: ignore[arg-type]
    ),
    "decline unknown id": (
        UnknownCheckpointError,
        lambda h, done, open_: h.coordinator.decline(999, "op0", 1, "x"),
    ),
    "decline completed id": (
        CheckpointFinishedError,
        lambda h, done, open_: h.coordinator.decline(done, "op0", 1, "x"),
    ),
    "decline by a subtask not waited for": (
        UnexpectedSubtaskError,
        lambda h, done, open_: h.coordinator.decline(open_, "op9", 0, "x"),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_request_changes_nothing(scene: tuple[Harness, int, int], case: str) -> None:
    h, done, open_ = scene
    error, call = BAD[case]
    before = _snapshot(h)
    with pytest.raises(error) as caught:
        call(h, done, open_)
    assert isinstance(caught.value, CoordinatorRequestError)
    assert str(caught.value)  # a message the REST layer can return
    assert _snapshot(h) == before
    # The checkpoint still completes normally afterwards.
    for uid, i in sorted(h.coordinator.pending_checkpoint(open_).waiting_for()):
        p = h.graph.operator(uid).parallelism
        result = h.coordinator.acknowledge(open_, uid, i, keyed_state(i, p))
    assert result.pointer is not None and h.store.get_latest() == result.pointer


def test_ids_of_this_coordinator_that_finished_long_ago_are_finished_not_unknown(
    harness: Harness,
) -> None:
    h = harness
    first = h.trigger_next()
    h.ack_all(first)
    with pytest.raises(CheckpointFinishedError) as caught:
        h.coordinator.acknowledge(first, "op0", 0, keyed_state(0, 2))
    assert caught.value.status == "COMPLETED" and caught.value.checkpoint_id == first


def test_an_empty_batch_changes_nothing(scene: tuple[Harness, int, int]) -> None:
    h, _, open_ = scene
    before = _snapshot(h)
    assert h.coordinator.acknowledge_all(open_, []).remaining == 4
    assert _snapshot(h) == before
