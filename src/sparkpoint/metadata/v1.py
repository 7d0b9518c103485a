"""Body of `_metadata` format version 1 (byte layout in docs/formats.md).

File paths are split at their last '/': the head (directory) goes into a table written
once, each handle keeps an index into it and the file name. Every state file of a
checkpoint sits in the same directory, so this removes almost all path bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sparkpoint.checkpoint import (
    UPPER_BOUND_MAX_PARALLELISM,
    CheckpointKind,
    CompletedCheckpoint,
    DistributionMode,
    FileStateHandle,
    InlineStateHandle,
    InvalidCheckpointValue,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
    StreamStateHandle,
)
from sparkpoint.metadata import paths
from sparkpoint.metadata.errors import MetadataError
from sparkpoint.metadata.wire import Reader, Writer

_T = TypeVar("_T")

VERSION = 1

KINDS = (CheckpointKind.CHECKPOINT, CheckpointKind.SAVEPOINT)
MODES = (DistributionMode.SPLIT_DISTRIBUTE, DistributionMode.UNION, DistributionMode.BROADCAST)
STREAM_FILE = 0
STREAM_INLINE = 1
#: No operator-state stream realistically has more elements; bounds allocations on decode.
MAX_ELEMENT_OFFSETS = 1 << 24


class _Paths:
    """The directory table built while encoding."""

    def __init__(self, relative_to: str | None) -> None:
        self.relative_to = relative_to
        self.index: dict[str, int] = {}

    def split(self, path: str) -> tuple[int, str]:
        path = paths.relativize(path, self.relative_to)
        cut = path.rfind("/") + 1
        head = path[:cut]
        number = self.index.get(head)
        if number is None:
            number = self.index[head] = len(self.index)
        return number, path[cut:]


def encode_body(checkpoint: CompletedCheckpoint, relative_to: str | None) -> bytes:
    table = _Paths(relative_to)
    ops = Writer()  # written after the table, which it fills
    ops.uvarint(len(checkpoint.operator_states))
    for uid, state in checkpoint.operator_states.items():
        ops.text(uid)
        ops.uvarint(state.parallelism)
        ops.uvarint(state.max_parallelism)
        ops.uvarint(len(state.subtask_states))
        for index in sorted(state.subtask_states):
            _write_subtask(ops, index, state.subtask_states[index], table)
    out = Writer()
    out.text(checkpoint.job_id)
    out.uvarint(checkpoint.checkpoint_id)
    out.u8(KINDS.index(checkpoint.kind))
    out.svarint(checkpoint.trigger_timestamp_ms)
    out.svarint(checkpoint.completion_timestamp_ms)
    out.uvarint(len(table.index))
    for head in table.index:
        out.text(head)
    out.buf += ops.buf
    return bytes(out.buf)


def _write_subtask(w: Writer, index: int, subtask: OperatorSubtaskState, table: _Paths) -> None:
    w.uvarint(index)
    w.uvarint(len(subtask.keyed))
    for handle in subtask.keyed:
        w.uvarint(handle.key_group_range.start)
        w.uvarint(handle.key_group_range.end + 1)  # exclusive end: the empty range fits
        w.packed(handle.offsets)
        _write_stream(w, handle.stream, table)
    w.uvarint(len(subtask.operator))
    for op_handle in subtask.operator:
        w.uvarint(len(op_handle.states))
        for name, info in op_handle.states.items():
            w.text(name)
            w.u8(MODES.index(info.mode))
            w.packed(info.offsets)
        _write_stream(w, op_handle.stream, table)


def _write_stream(w: Writer, stream: StreamStateHandle, table: _Paths) -> None:
    if isinstance(stream, FileStateHandle):
        w.u8(STREAM_FILE)
        number, name = table.split(stream.path)
        w.uvarint(number)
        w.text(name)
        w.uvarint(stream.size)
    else:
        w.u8(STREAM_INLINE)
        w.text(stream.name)
        w.raw(stream.data)


class _Decoder:
    def __init__(self, reader: Reader, base_dir: str | None) -> None:
        self.r = reader
        self.base_dir = base_dir
        self.heads: list[str] = []

    def fail(self, defect: str) -> MetadataError:
        return MetadataError(self.r.source, defect)

    def checkpoint(self) -> CompletedCheckpoint:
        r = self.r
        job_id = r.text("job id")
        checkpoint_id = r.uvarint("checkpoint id")
        kind_code = r.u8("kind")
        if kind_code >= len(KINDS):
            raise r.error(f"unknown checkpoint kind {kind_code}")
        trigger = r.svarint("trigger timestamp")
        completion = r.svarint("completion timestamp")
        self.heads = [r.text("directory") for _ in range(r.count("directories", min_bytes_each=1))]
        operators: dict[str, OperatorState] = {}
        for _ in range(r.count("operators", min_bytes_each=4)):
            state = self.operator()
            if state.operator_uid in operators:
                raise self.fail(f"operator {state.operator_uid!r} appears twice")
            operators[state.operator_uid] = state
        if r.remaining:
            raise r.error(f"{r.remaining} unread bytes after the last operator")
        return self.build(
            f"checkpoint {checkpoint_id}",
            lambda: CompletedCheckpoint(
                job_id=job_id,
                checkpoint_id=checkpoint_id,
                kind=KINDS[kind_code],
                trigger_timestamp_ms=trigger,
                completion_timestamp_ms=completion,
                operator_states=operators,
            ),
        )

    def operator(self) -> OperatorState:
        r = self.r
        uid = r.text("operator uid")
        parallelism = r.uvarint("parallelism")
        max_parallelism = r.uvarint("max parallelism")
        subtasks: dict[int, OperatorSubtaskState] = {}
        for _ in range(r.count("subtasks", min_bytes_each=3)):
            index = r.uvarint("subtask index")
            where = f"operator {uid!r} subtask {index}"
            if index in subtasks:
                raise self.fail(f"operator {uid!r}: duplicate subtask index {index}")
            subtasks[index] = self.subtask(where)
        return self.build(
            f"operator {uid!r}",
            lambda: OperatorState(uid, parallelism, max_parallelism, subtasks),
        )

    def subtask(self, where: str) -> OperatorSubtaskState:
        r = self.r
        keyed = [self.keyed(where) for _ in range(r.count("keyed handles", min_bytes_each=5))]
        operator = [
            self.operator_handle(where)
            for _ in range(r.count("operator handles", min_bytes_each=4))
        ]
        return OperatorSubtaskState(tuple(keyed), tuple(operator))

    def keyed(self, where: str) -> KeyGroupsStateHandle:
        r = self.r
        start = r.uvarint("key-group range start")
        end_exclusive = r.uvarint("key-group range end")
        offsets = r.packed("key-group offsets", max_count=UPPER_BOUND_MAX_PARALLELISM)
        stream = self.stream(where)
        if end_exclusive < start:
            raise self.fail(f"{where}: key-group range [{start}, {end_exclusive - 1}] is inverted")
        key_groups = self.build(where, lambda: KeyGroupRange(start, end_exclusive - 1))
        if len(offsets) != key_groups.num_key_groups:
            raise self.fail(
                f"{where}: {len(offsets)} key-group offsets contradict the range {key_groups} "
                f"of {key_groups.num_key_groups} key groups"
            )
        return self.build(where, lambda: KeyGroupsStateHandle(key_groups, offsets, stream))

    def operator_handle(self, where: str) -> OperatorStateHandle:
        r = self.r
        states: dict[str, StateMetaInfo] = {}
        for _ in range(r.count("operator states", min_bytes_each=3)):
            name = r.text("state name")
            mode_code = r.u8("distribution mode")
            if mode_code >= len(MODES):
                raise r.error(f"{where}: unknown distribution mode {mode_code}")
            offsets = r.packed("element offsets", max_count=MAX_ELEMENT_OFFSETS)
            if name in states:
                raise self.fail(f"{where}: operator state {name!r} appears twice")
            states[name] = StateMetaInfo(offsets, MODES[mode_code])
        stream = self.stream(where)
        return self.build(where, lambda: OperatorStateHandle(states, stream))

    def stream(self, where: str) -> StreamStateHandle:
        r = self.r
        tag = r.u8("stream handle kind")
        if tag == STREAM_INLINE:
            name = r.text("inline state name")
            return InlineStateHandle(name, r.raw("inline state"))
        if tag != STREAM_FILE:
            raise r.error(f"{where}: unknown stream handle kind {tag}")
        number = r.uvarint("directory index")
        if number >= len(self.heads):
            raise r.error(f"{where}: directory index {number} beyond the {len(self.heads)} known")
        path = self.heads[number] + r.text("file name")
        size = r.uvarint("file size")
        if paths.is_relative(path) and self.base_dir is not None:
            unsafe = paths.unsafe_relative(path)
            if unsafe:
                raise self.fail(f"{where}: {unsafe}")
            path = paths.resolve(path, self.base_dir)
        return self.build(where, lambda: FileStateHandle(path, size))

    def build(self, where: str, make: Callable[[], _T]) -> _T:
        # The domain model validates itself; its complaint becomes a MetadataError here.
        try:
            return make()
        except InvalidCheckpointValue as exc:
            raise self.fail(f"{where}: {exc}") from None


def decode_body(reader: Reader, base_dir: str | None) -> CompletedCheckpoint:
    return _Decoder(reader, base_dir).checkpoint()
