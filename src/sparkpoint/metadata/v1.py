"""Body of `_metadata` format versions 1 to 3 (byte layout in docs/formats.md).

Version 2 is version 1 with a kind byte before each keyed handle: 0 for a key-groups
stream (the version-1 handle), 1 for an embedded store's files (incremental state, with
shared files under ``<job>/shared/``). Version 3 adds a byte after each shared store file:
1 when an earlier checkpoint uploaded it and this one references it again, 0 when this
checkpoint wrote it (a version-2 file reads as having written every one).

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
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    InvalidCheckpointValue,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorState,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
    StoreFile,
    StreamStateHandle,
)
from sparkpoint.metadata import paths
from sparkpoint.metadata.errors import MetadataError
from sparkpoint.metadata.wire import Reader, Writer

_T = TypeVar("_T")

VERSION = 3
KEYED_STREAM = 0
KEYED_INCREMENTAL = 1
#: Version 3: after each shared store file, who wrote it.
WRITTEN = 0
REUSED = 1

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
    """The body in the current version (3)."""
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
        if isinstance(handle, IncrementalKeyedStateHandle):
            w.u8(KEYED_INCREMENTAL)
            _write_incremental(w, handle, table)
            continue
        w.u8(KEYED_STREAM)
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


def _write_incremental(w: Writer, handle: IncrementalKeyedStateHandle, table: _Paths) -> None:
    for r in (handle.key_group_range, handle.store_range):
        w.uvarint(r.start)
        w.uvarint(r.end + 1)
    w.text(handle.instance)
    w.uvarint(len(handle.shared))
    for f in handle.shared:
        w.text(f.name)
        _write_stream(w, f.stream, table)
        w.u8(REUSED if f.name in handle.reused else WRITTEN)
    w.uvarint(len(handle.private))
    for f in handle.private:
        w.text(f.name)
        _write_stream(w, f.stream, table)


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
    def __init__(self, reader: Reader, base_dir: str | None, version: int) -> None:
        self.version = version
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

    def keyed(self, where: str) -> KeyedStateHandle:
        r = self.r
        if self.version >= 2:
            kind = r.u8("keyed handle kind")
            if kind == KEYED_INCREMENTAL:
                return self.incremental(where)
            if kind != KEYED_STREAM:
                raise r.error(f"{where}: unknown keyed handle kind {kind}")
        start = r.uvarint("key-group range start")
        end_exclusive = r.uvarint("key-group range end")
        offsets = r.packed("key-group offsets", max_count=UPPER_BOUND_MAX_PARALLELISM)
        stream = self.stream(where)
        if end_exclusive < start:
            raise self.fail(f"{where}: key-group range [{start}, {end_exclusive - 1}] is inverted")
        if len(offsets) != end_exclusive - start:
            raise self.fail(
                f"{where}: {len(offsets)} key-group offsets contradict the range "
                f"{KeyGroupRange(start, end_exclusive - 1)} of {end_exclusive - start} key groups"
            )
        # One try block instead of a closure per value: this runs once per subtask.
        try:
            return KeyGroupsStateHandle(KeyGroupRange(start, end_exclusive - 1), offsets, stream)
        except InvalidCheckpointValue as exc:
            raise self.fail(f"{where}: {exc}") from None

    def incremental(self, where: str) -> IncrementalKeyedStateHandle:
        r = self.r
        ranges = []
        for what in ("key-group range", "store key-group range"):
            start = r.uvarint(f"{what} start")
            end_exclusive = r.uvarint(f"{what} end")
            if end_exclusive <= start:
                raise self.fail(f"{where}: {what} [{start}, {end_exclusive - 1}] is empty")
            ranges.append((start, end_exclusive - 1))
        instance = r.text("store instance")
        flagged = self.version >= 3
        shared, reused = [], set()
        for _ in range(r.count("shared store files", min_bytes_each=4 if flagged else 3)):
            name, stream = r.text("store file name"), self.stream(where)
            shared.append((name, stream))
            if flagged:
                origin = r.u8("shared file origin")
                if origin not in (WRITTEN, REUSED):
                    raise r.error(f"{where}: unknown shared file origin {origin}")
                if origin == REUSED:
                    reused.add(name)
        private = [
            (r.text("store file name"), self.stream(where))
            for _ in range(r.count("private store files", min_bytes_each=3))
        ]
        return self.build(
            where,
            lambda: IncrementalKeyedStateHandle(
                KeyGroupRange(*ranges[0]),
                KeyGroupRange(*ranges[1]),
                instance,
                tuple(StoreFile(n, s) for n, s in shared),
                tuple(StoreFile(n, s) for n, s in private),
                frozenset(reused),
            ),
        )

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
        if self.base_dir is not None and paths.is_relative(path):
            unsafe = paths.unsafe_relative(path)
            if unsafe:
                raise self.fail(f"{where}: {unsafe}")
            path = paths.resolve(path, self.base_dir)
        try:
            return FileStateHandle(path, size)
        except InvalidCheckpointValue as exc:
            raise self.fail(f"{where}: {exc}") from None

    def build(self, where: str, make: Callable[[], _T]) -> _T:
        # The domain model validates itself; its complaint becomes a MetadataError here.
        try:
            return make()
        except InvalidCheckpointValue as exc:
            raise self.fail(f"{where}: {exc}") from None


def decode_body_v1(reader: Reader, base_dir: str | None) -> CompletedCheckpoint:
    return _Decoder(reader, base_dir, 1).checkpoint()


def decode_body_v2(reader: Reader, base_dir: str | None) -> CompletedCheckpoint:
    return _Decoder(reader, base_dir, 2).checkpoint()


def decode_body(reader: Reader, base_dir: str | None) -> CompletedCheckpoint:
    """A body of version 3 (the current one)."""
    return _Decoder(reader, base_dir, 3).checkpoint()
