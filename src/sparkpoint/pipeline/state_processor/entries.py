"""One operator's keyed state as ``(key, state name, value)`` entries, read from any
checkpoint or savepoint, and a savepoint written from such entries — what Flink's State
Processor API reads and bootstraps (docs/pipeline.md, "Reading and bootstrapping state").

No Spark here: ``sparkpoint state read`` uses this module as it is, and
``savepoints.py`` puts the same entries into DataFrames.

A pipeline keeps, per key, ``{state name → value}`` pickled as one value (state/memory/tasks.py,
state/rocksdb/store.py), whatever the backend; the files hold it either as key-group streams
(the canonical format: every savepoint, and checkpoints of the memory backend) or as an
embedded store's files (incremental checkpoints of the rocksdb backend, read out of a
scratch copy of the store). Unpickling runs the pickles' code: read only checkpoints you
trust, with the pipeline's own modules importable for values of its own classes.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.checkpoint import (
    CheckpointKind,
    CompletedCheckpoint,
    IncrementalKeyedStateHandle,
    OperatorState,
    OperatorSubtaskState,
    validate_operator_uid,
)
from sparkpoint.pipeline.api.ttl import unwrap
from sparkpoint.pipeline.state import pickles
from sparkpoint.recovery.errors import RestoreError, StateFileError
from sparkpoint.recovery.loading import LoadedCheckpoint, load_checkpoint
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.statefiles.keygroups import (
    default_max_parallelism,
    key_group_for_key,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from sparkpoint.statefiles.keys import Key, KeyEncodingError, canonical_key_bytes, decode_key
from sparkpoint.statefiles.writers import write_keyed_state
from sparkpoint.storage import CheckpointLocation, CheckpointStorage

#: The checkpoint id of a bootstrapped savepoint: a job restored from it counts on from here.
BOOTSTRAP_CHECKPOINT_ID = 1


class UnknownOperatorError(RestoreError):
    """The checkpoint holds no state of the operator asked for (the error lists those it
    holds)."""


@dataclass(frozen=True, slots=True)
class StateEntry:
    """One state of one key: ``("user-7", "totals", (12, 340))``."""

    key: Key
    state: str
    value: Any


def load_operator(
    pointer: str, uid: str | None, **fs_options: Any
) -> tuple[LoadedCheckpoint, OperatorState]:
    """The checkpoint at ``pointer`` (as ``sparkpoint restore plan`` takes it) and its
    operator ``uid``; ``uid`` None: the one operator with keyed state.

    Raises ``CheckpointLoadError`` (not a checkpoint) or :class:`UnknownOperatorError`."""
    loaded = load_checkpoint(CheckpointStorage(pointer, **fs_options), pointer)
    states = loaded.checkpoint.operator_states
    keyed = sorted(u for u, s in states.items() if any(t.keyed for t in s.subtask_states.values()))
    where = loaded.describe()
    if uid is None:
        if len(keyed) != 1:
            found = ", ".join(keyed) if keyed else "none"
            raise UnknownOperatorError(
                f"{where}: name the operator with --uid (operators with keyed state: {found})"
            )
        uid = keyed[0]
    if uid not in states:
        raise UnknownOperatorError(
            f"{where} has no operator {uid!r}; its operators: {', '.join(sorted(states))} "
            f"(with keyed state: {', '.join(keyed) or 'none'})"
        )
    if uid not in keyed:
        raise UnknownOperatorError(
            f"{where}: operator {uid!r} has no keyed state (operators with keyed state: "
            f"{', '.join(keyed) or 'none'})"
        )
    return loaded, states[uid]


def subtask_entries(
    operator: OperatorState, index: int, scratch: Path | None = None
) -> Iterator[tuple[Key, bytes]]:
    """``(key, pickled {state name → value})`` of subtask ``index``, in key-group order; an
    embedded store's files are read out of a copy under ``scratch`` (default: the system's
    temporary directory)."""
    from sparkpoint.pipeline.state.snapshots import keyed_entries

    state = operator.subtask_states.get(index)
    if state is None or not state.keyed:
        return
    root = scratch or Path(tempfile.gettempdir(), "sparkpoint-state-read")
    if any(isinstance(h, IncrementalKeyedStateHandle) for h in state.keyed):
        root.mkdir(parents=True, exist_ok=True)
    subtask = SubtaskRestore(
        index,
        key_group_range_for_subtask(operator.max_parallelism, operator.parallelism, index),
        keyed=state.keyed,
    )
    for _, key_bytes, value in keyed_entries(subtask, operator.max_parallelism, root):
        yield decode_key(key_bytes), value


def raw_entries(
    operator: OperatorState, scratch: Path | None = None
) -> Iterator[tuple[Key, bytes]]:
    """:func:`subtask_entries` of every subtask, subtask by subtask."""
    for index in range(operator.parallelism):
        yield from subtask_entries(operator, index, scratch)


def decode_entries(
    raw: Iterable[tuple[Key, bytes]], uid: str, *, keep_ttl: bool = False
) -> Iterator[StateEntry]:
    """One :class:`StateEntry` per state of each key, states in name order; values as
    the function sees them (a TTL's wrapper taken off, expired or not: what the
    snapshot held), or with ``keep_ttl`` as stored (``state_ttl.TtlValue``)."""
    for key, value in raw:
        try:
            states = pickles.loads(value)
        except Exception as exc:  # whatever the pickle's own code raises
            raise StateFileError(
                f"operator {uid!r}, key {key!r}: cannot unpickle its state ({exc}); are the "
                "pipeline's modules importable here?"
            ) from exc
        if not isinstance(states, dict):
            raise StateFileError(
                f"operator {uid!r}, key {key!r}: state is a {type(states).__name__}, not the "
                "pipeline's {state name: value}"
            )
        for name in sorted(states):
            yield StateEntry(key, name, states[name] if keep_ttl else unwrap(states[name]))


def read_state_entries(
    pointer: str, uid: str | None = None, *, keep_ttl: bool = False, **fs_options: Any
) -> Iterator[StateEntry]:
    """Every ``(key, state, value)`` of operator ``uid`` in the checkpoint at ``pointer``
    (``keep_ttl``: see :func:`decode_entries`).

    >>> for e in read_state_entries("/ckpt/clicks/chk-42", "process"):  # doctest: +SKIP
    ...     print(e.key, e.state, e.value)
    user-7 totals (12, 340)
    """
    _, operator = load_operator(pointer, uid, **fs_options)
    return decode_entries(raw_entries(operator), operator.operator_uid, keep_ttl=keep_ttl)


def to_json(value: Any) -> str:
    """JSON text of a key or value (tuples as arrays); what JSON cannot hold (sets, a
    map with tuple keys, NaN, objects) as the JSON string of its ``repr``."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(repr(value), ensure_ascii=False)


def key_from_json(text: str) -> Key:
    """A key from its JSON text: arrays become tuples (a key is never a list)."""
    return _tuples(json.loads(text))


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


#: The fields of a JSON line of ``sparkpoint state read``.
JSON_LINE_FIELDS = ("key", "state", "value")


def entries_from_json_lines(
    lines: Iterable[str], where: str = "input"
) -> Iterator[tuple[Key, str, Any]]:
    """``(key, state, value)`` of each JSON line ``{"key": …, "state": …, "value": …}``
    as ``sparkpoint state read`` prints them (blank lines skipped): arrays become tuples
    in keys and stay lists in values. A line that is not such an object raises
    ``ValueError`` naming ``where`` and the line's number."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        bad = f"{where}, line {number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{bad}: not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise ValueError(f"{bad}: a JSON {type(row).__name__}, not an object with "
                             "key, state and value")  # fmt: skip
        missing = [f for f in JSON_LINE_FIELDS if f not in row]
        if missing:
            raise ValueError(f"{bad}: no {' or '.join(missing)} (each line is "
                             '{"key": …, "state": …, "value": …})')  # fmt: skip
        key, state = _tuples(row["key"]), row["state"]
        if not isinstance(state, str) or not state:
            raise ValueError(f"{bad}: state {state!r} is not a non-empty string")
        try:
            canonical_key_bytes(key)
        except KeyEncodingError as exc:
            raise ValueError(f"{bad}: key {row['key']!r} cannot key state ({exc})") from exc
        yield key, state, row["value"]


# -- bootstrapping ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SavepointTarget:
    """Where and for what a bootstrapped savepoint is written: the operator's uid and the
    parallelism and max parallelism of the job that will start from it (max parallelism
    must be the job's; parallelism may differ, restores rescale)."""

    location: CheckpointLocation
    uid: str
    parallelism: int
    max_parallelism: int

    def subtask_of(self, key: Key) -> int:
        group = key_group_for_key(key, self.max_parallelism)
        return subtask_for_key_group(self.max_parallelism, self.parallelism, group)


def new_savepoint(
    directory: str,
    *,
    uid: str,
    parallelism: int,
    max_parallelism: int | None = None,
    job_id: str = "bootstrap",
    **fs_options: Any,
) -> SavepointTarget:
    """A new ``savepoint-<job>-<random>`` directory under ``directory`` to bootstrap into."""
    validate_operator_uid(uid)
    m = max_parallelism or default_max_parallelism(parallelism)
    key_group_range_for_subtask(m, parallelism, 0)  # checks parallelism against m
    storage = CheckpointStorage(directory, savepoint_dir=directory, **fs_options)
    return SavepointTarget(storage.init_savepoint(job_id), uid, parallelism, m)


def group_states(entries: Iterable[tuple[Key, str, Any]]) -> dict[Key, dict[str, Any]]:
    """``{key: {state name: value}}``; a state given twice for one key is refused."""
    out: dict[Key, dict[str, Any]] = {}
    for key, name, value in entries:
        if not isinstance(name, str) or not name:
            raise ValueError(f"key {key!r}: state name {name!r} is not a non-empty string")
        states = out.setdefault(key, {})
        if name in states:
            raise ValueError(f"key {key!r}: state {name!r} given twice")
        states[name] = value
    return out


def write_subtask(
    target: SavepointTarget, index: int, states: dict[Key, dict[str, Any]], attempt: int = 0
) -> OperatorSubtaskState:
    """Subtask ``index``'s keyed state as one key-group stream (docs/state-files.md);
    every key must belong to the subtask."""
    for key in states:
        if target.subtask_of(key) != index:
            raise ValueError(
                f"key {key!r} belongs to subtask {target.subtask_of(key)}, not {index}"
            )
    groups = key_group_range_for_subtask(target.max_parallelism, target.parallelism, index)
    stream = target.location.state_output(target.uid, index, attempt)
    items = ((k, pickles.dumps(v)) for k, v in states.items())
    try:
        handle = write_keyed_state(stream, items, groups, target.max_parallelism)
    except BaseException:
        stream.abort()
        raise
    return OperatorSubtaskState(keyed=(handle,))


def commit_savepoint(target: SavepointTarget, subtasks: dict[int, OperatorSubtaskState]) -> str:
    """Write the savepoint's `_metadata` (last: before it there is no savepoint) and return
    the savepoint directory, the pointer a pipeline restores from."""
    now = int(time.time() * 1000)
    location = target.location
    checkpoint = CompletedCheckpoint(
        location.job_id,
        BOOTSTRAP_CHECKPOINT_ID,
        CheckpointKind.SAVEPOINT,
        now,
        now,
        {
            target.uid: OperatorState(
                target.uid, target.parallelism, target.max_parallelism, subtasks
            )
        },
    )
    location.commit_metadata(checkpoint)
    return location.directory


def write_savepoint_entries(
    entries: Iterable[tuple[Key, str, Any]],
    directory: str,
    *,
    uid: str,
    parallelism: int,
    max_parallelism: int | None = None,
    job_id: str = "bootstrap",
    **fs_options: Any,
) -> str:
    """A savepoint under ``directory`` holding ``entries`` as operator ``uid``'s keyed
    state, written in this process; returns its directory. (``state_processor.
    write_savepoint`` does the same from a DataFrame, one Spark task per subtask.)
    Entries refused (``ValueError``) leave no savepoint directory behind."""
    grouped = group_states(entries)
    target = new_savepoint(
        directory, uid=uid, parallelism=parallelism, max_parallelism=max_parallelism,
        job_id=job_id, **fs_options,
    )  # fmt: skip
    per_subtask: dict[int, dict[Key, dict[str, Any]]] = {i: {} for i in range(parallelism)}
    for key, states in grouped.items():
        per_subtask[target.subtask_of(key)][key] = states
    written = {i: write_subtask(target, i, states) for i, states in per_subtask.items()}
    return commit_savepoint(target, written)
