"""Checkpoint values cross process boundaries (Spark executors → driver) by pickle."""

from __future__ import annotations

import pickle

from hypothesis import given, settings

from sparkpoint.checkpoint import CompletedCheckpoint
from tests.metadata.strategies import checkpoints


@settings(max_examples=50, deadline=None)
@given(checkpoints())
def test_checkpoints_and_their_parts_survive_pickling(checkpoint: CompletedCheckpoint) -> None:
    assert pickle.loads(pickle.dumps(checkpoint)) == checkpoint
    for state in checkpoint.operator_states.values():
        assert pickle.loads(pickle.dumps(state)) == state
        for subtask in state.subtask_states.values():
            assert pickle.loads(pickle.dumps(subtask)) == subtask
