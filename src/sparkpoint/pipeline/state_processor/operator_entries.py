"""Operator (non-keyed) state out of a checkpoint or savepoint, offline: a source's
offsets and event-time maxima, a sink's transactions, a broadcast function's maps
(``broadcast/<name>``), each element with the subtask that holds it and its
redistribution mode."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import OperatorState
from sparkpoint.pipeline.api.operator_state import decode_element
from sparkpoint.pipeline.state_processor.entries import UnknownOperatorError
from sparkpoint.recovery.loading import load_checkpoint
from sparkpoint.recovery.reader import read_operator_state
from sparkpoint.storage import CheckpointStorage


@dataclass(frozen=True, slots=True)
class OperatorStateEntry:
    """One element: ``("check", 2, "broadcast/rules", "BROADCAST", {...})``."""

    operator: str
    subtask: int
    state: str
    mode: str
    value: Any


def read_operator_state_entries(
    pointer: str, uid: str | None = None, **fs_options: Any
) -> Iterator[OperatorStateEntry]:
    """Every element of the operator state in the checkpoint at ``pointer``: of operator
    ``uid``, or of every operator that has some (in uid, subtask and state-name order).

    Loads and checks at once; raises ``CheckpointLoadError`` (not a checkpoint) or
    ``UnknownOperatorError``."""
    loaded = load_checkpoint(CheckpointStorage(pointer, **fs_options), pointer)
    states = loaded.checkpoint.operator_states
    with_state = sorted(
        u for u, s in states.items() if any(t.operator for t in s.subtask_states.values())
    )
    if uid is not None and uid not in with_state:
        raise UnknownOperatorError(
            f"{loaded.describe()}: operator {uid!r} has no operator state (operators with "
            f"operator state: {', '.join(with_state) or 'none'})"
        )
    return _entries(states, [uid] if uid is not None else with_state)


def _entries(states: Mapping[str, OperatorState], uids: list[str]) -> Iterator[OperatorStateEntry]:
    for operator_uid in uids:
        subtasks = states[operator_uid].subtask_states
        for index in sorted(subtasks):
            handles = subtasks[index].operator
            modes = {name: info.mode.name for h in handles for name, info in h.states.items()}
            for name, elements in sorted(read_operator_state(handles).items()):
                for element in elements:
                    yield OperatorStateEntry(
                        operator_uid, index, name, modes[name], decode_element(element)
                    )
