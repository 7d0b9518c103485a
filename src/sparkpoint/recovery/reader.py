"""Task-side restore: read one subtask's share of keyed and operator state.

Given a subtask's assignment from a :class:`~sparkpoint.recovery.plan.RestorePlan`, the
keyed reader seeks to each key group's offset in each handle and yields
``(key_group, key, value_bytes)``; it never reads the key groups of other subtasks.
Bytes come from a ``read_range(path, offset, length)`` filesystem (local or HDFS, from
``sparkpoint.storage.filesystem_for``) or from the inline handle itself; the format they
are in is read by ``sparkpoint.statefiles.reader``, beside its writers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from sparkpoint.checkpoint import (
    FileStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    StreamStateHandle,
)
from sparkpoint.recovery.errors import StateFileError
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.statefiles.keys import Key
from sparkpoint.statefiles.reader import (
    StateFormatError,
    key_group_length,
    operator_element,
    parse_key_group,
)
from sparkpoint.statefiles.writers import GROUP_HEADER
from sparkpoint.storage.errors import StorageError

#: Consecutive key groups are fetched together up to this many bytes per read: few round
#: trips on HDFS, bounded memory. A single larger group is read on its own.
READ_CHUNK = 16 * 1024 * 1024


class RangeReader(Protocol):
    """The part of storage's FileSystem a reader needs."""

    def read_range(self, path: str, offset: int, length: int) -> bytes: ...


FileSystemFor = Callable[[str], RangeReader]


def _default_filesystem_for(uri: str) -> RangeReader:
    from sparkpoint.storage import filesystem_for

    return filesystem_for(uri)


class StreamReader:
    """Reads byte ranges of stream handles (files through their filesystem, inline bytes
    directly), with the error naming the file on a short read."""

    def __init__(self, filesystem_for: FileSystemFor | None = None) -> None:
        self._filesystem_for = filesystem_for or _default_filesystem_for
        self._cache: dict[str, RangeReader] = {}

    def read(self, stream: StreamStateHandle, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > stream.size:
            raise StateFileError(
                f"{_describe(stream)}: range {offset}+{length} is outside its {stream.size} bytes"
            )
        if not isinstance(stream, FileStateHandle):
            return stream.data[offset : offset + length]
        fs = self._cache.get(stream.path)
        if fs is None:
            fs = self._cache[stream.path] = self._filesystem_for(stream.path)
        try:
            data = fs.read_range(stream.path, offset, length)
        except (OSError, StorageError) as exc:
            raise StateFileError(f"{stream.path}: cannot read state: {exc}") from exc
        if len(data) != length:
            raise StateFileError(
                f"{stream.path}: short read at {offset} ({len(data)} of {length} bytes); "
                "the file is truncated"
            )
        return data


def _describe(stream: StreamStateHandle) -> str:
    return stream.path if isinstance(stream, FileStateHandle) else f"inline state {stream.name!r}"


def _parse_group(
    stream: StreamStateHandle, data: bytes, key_group: int, max_parallelism: int | None
) -> Iterator[tuple[Key, bytes]]:
    try:
        yield from parse_key_group(data, key_group, max_parallelism)
    except StateFormatError as exc:
        raise StateFileError(f"{_describe(stream)}, key group {key_group}: {exc}") from exc


def _group_spans(reader: StreamReader, handle: KeyGroupsStateHandle) -> list[tuple[int, int, int]]:
    """(key group, start, end) of every group of ``handle``. Ends come from the next
    offset; the last group's from its header (the handle may be cut from a larger one)."""
    offsets = handle.offsets
    last = offsets[-1]
    header = reader.read(handle.stream, last, GROUP_HEADER.size)
    try:
        last_length = key_group_length(header)
    except StateFormatError as exc:
        raise StateFileError(
            f"{_describe(handle.stream)}, key group {handle.key_group_range.end}: {exc}"
        ) from exc
    ends = [*offsets[1:], last + last_length]
    return list(zip(handle.key_group_range, offsets, ends, strict=True))


def read_keyed_handle(
    handle: KeyGroupsStateHandle,
    reader: StreamReader,
    *,
    max_parallelism: int | None = None,
) -> Iterator[tuple[int, Key, bytes]]:
    """Yield ``(key_group, key, value)`` for every entry of ``handle``'s key groups.

    With ``max_parallelism``, every key is checked to hash into the group it was found in.
    """
    if handle.key_group_range.is_empty:
        return
    spans = _group_spans(reader, handle)
    i = 0
    while i < len(spans):
        # Batch consecutive groups into one read of at most READ_CHUNK bytes.
        j, start = i, spans[i][1]
        while j + 1 < len(spans) and spans[j + 1][2] - start <= READ_CHUNK:
            j += 1
        end = spans[j][2]
        data = reader.read(handle.stream, start, end - start)
        for key_group, group_start, group_end in spans[i : j + 1]:
            chunk = data[group_start - start : group_end - start]
            for key, value in _parse_group(handle.stream, chunk, key_group, max_parallelism):
                yield key_group, key, value
        i = j + 1


def read_keyed_state(
    handles: Iterable[KeyGroupsStateHandle],
    filesystem_for: FileSystemFor | None = None,
    *,
    max_parallelism: int | None = None,
) -> Iterator[tuple[int, Key, bytes]]:
    """Every entry of ``handles``, handle by handle (each in key-group order)."""
    reader = StreamReader(filesystem_for)
    for handle in handles:
        yield from read_keyed_handle(handle, reader, max_parallelism=max_parallelism)


def read_subtask_keyed_state(
    subtask: SubtaskRestore,
    filesystem_for: FileSystemFor | None = None,
    *,
    max_parallelism: int | None = None,
) -> Iterator[tuple[int, Key, bytes]]:
    """The keyed state of one new subtask of a restore plan.

    >>> for key_group, key, value in read_subtask_keyed_state(plan.subtask("count", 0)):
    ...     state[key] = pickle.loads(value)  # doctest: +SKIP
    """
    for handle in subtask.keyed:
        if not isinstance(handle, KeyGroupsStateHandle):
            raise StateFileError(
                f"subtask {subtask.index}: keyed state of key groups {handle.key_group_range} "
                "is an embedded store's files; read it with sparkpoint.pipeline.state.rocksdb.files"
            )
        if handle.key_group_range.intersection(subtask.key_group_range) != handle.key_group_range:
            raise StateFileError(
                f"subtask {subtask.index}: handle for {handle.key_group_range} reaches outside "
                f"its key groups {subtask.key_group_range}"
            )
    handles = [h for h in subtask.keyed if isinstance(h, KeyGroupsStateHandle)]
    return read_keyed_state(handles, filesystem_for, max_parallelism=max_parallelism)


def read_operator_state(
    handles: Iterable[OperatorStateHandle], filesystem_for: FileSystemFor | None = None
) -> dict[str, list[bytes]]:
    """Per state name, the elements assigned to this subtask, in plan order. A name
    that is missing got no elements here (SPLIT_DISTRIBUTE with fewer elements than
    subtasks): treat it as an empty list.

    Operator state is small (source offsets and the like), so each stream is read whole
    once and elements are cut from it.
    """
    reader = StreamReader(filesystem_for)
    out: dict[str, list[bytes]] = {}
    for handle in handles:
        data = reader.read(handle.stream, 0, handle.stream.size)
        for name, info in handle.states.items():
            elements = out.setdefault(name, [])
            for offset in info.offsets:
                try:
                    elements.append(operator_element(data, offset, name))
                except StateFormatError as exc:
                    raise StateFileError(f"{_describe(handle.stream)}: {exc}") from exc
    return out
