"""The on-disk format of keyed and operator state streams, and their writers.

Specified in ``docs/state-files.md``. Kept free of heavy imports (stdlib, mmh3 and the
checkpoint values only) because Spark executors import it to write snapshots; a writer is
bound to its output stream, so create it on the executor, not on the driver.

Keyed state stream::

    file header   "SPKS"  version:u8  first_key_group:u32  key_group_count:u32
    per key group "SPKG"  key_group:u32  entries:u32  body_length:u64  crc32(body):u32
                  body = entries x ( canonical key bytes | value_length:u32 | value )

Every key group of the range has a group header, empty ones too; the handle's offset of
a key group is the position of its group header.

Operator state stream: elements back to back, each ``length:u32 | payload``; the handle
records, per state name, the offset of each of its elements.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Protocol

from sparkpoint.checkpoint import (
    DistributionMode,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    StateMetaInfo,
    StreamStateHandle,
)
from sparkpoint.statefiles.keygroups import key_group_for_key_bytes
from sparkpoint.statefiles.keys import Key, canonical_key_bytes

KEYED_MAGIC = b"SPKS"
GROUP_MAGIC = b"SPKG"
KEYED_FORMAT_VERSION = 1
FILE_HEADER = struct.Struct(">4sBII")
GROUP_HEADER = struct.Struct(">4sIIQI")
U32 = struct.Struct(">I")
MAX_VALUE_SIZE = 2**32 - 1


class OutputStream(Protocol):
    """What the writers need: storage's state output stream satisfies it, as does a file."""

    def write(self, data: bytes, /) -> object: ...


class StateOutputStream(OutputStream, Protocol):
    def close_and_get_handle(self) -> StreamStateHandle: ...


class KeyedStateWriter:
    """Writes one subtask's keyed state as one stream, key group by key group.

    >>> import io
    >>> out = io.BytesIO()
    >>> w = KeyedStateWriter(out, KeyGroupRange(0, 1), max_parallelism=2)
    >>> w.begin_key_group(key_group_for_key_bytes(canonical_key_bytes("a"), 2))
    >>> w.write("a", b"state of a")
    >>> w.finish()
    (13, 37)
    """

    def __init__(
        self,
        stream: OutputStream,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        *,
        start_position: int = 0,
    ) -> None:
        if key_group_range.is_empty or key_group_range.end >= max_parallelism:
            raise ValueError(
                f"key group range {key_group_range} is empty or beyond max parallelism "
                f"{max_parallelism}"
            )
        self._stream = stream
        self._range = key_group_range
        self._max_parallelism = max_parallelism
        self._position = start_position
        self._offsets: list[int] = []
        self._current: int | None = None
        self._body: list[bytes] = []
        self._entries = 0
        self._finished = False
        self._emit(
            FILE_HEADER.pack(
                KEYED_MAGIC,
                KEYED_FORMAT_VERSION,
                key_group_range.start,
                key_group_range.num_key_groups,
            )
        )

    def _emit(self, data: bytes) -> None:
        self._stream.write(data)
        self._position += len(data)

    def _flush_group(self) -> None:
        if self._current is None:
            return
        body = b"".join(self._body)
        self._offsets.append(self._position)
        self._emit(
            GROUP_HEADER.pack(
                GROUP_MAGIC, self._current, self._entries, len(body), zlib.crc32(body)
            )
        )
        self._emit(body)
        self._body, self._entries = [], 0

    def begin_key_group(self, key_group: int) -> None:
        """Start ``key_group``; groups must come in increasing order (skipped ones are
        written empty)."""
        if self._finished:
            raise ValueError("writer is finished")
        if key_group not in self._range:
            raise ValueError(f"key group {key_group} is not in {self._range}")
        if self._current is not None and key_group <= self._current:
            raise ValueError(f"key group {key_group} after {self._current}: not increasing")
        next_group = self._range.start if self._current is None else self._current + 1
        self._flush_group()
        for empty in range(next_group, key_group):
            self._current = empty
            self._flush_group()
        self._current = key_group

    def write(self, key: Key, value: bytes) -> None:
        """Add ``key`` with its (already serialised) ``value`` to the current key group."""
        self.write_encoded(canonical_key_bytes(key), value)

    def write_encoded(self, key_bytes: bytes, value: bytes) -> None:
        """As :meth:`write`, for a key already in canonical bytes."""
        if self._current is None or self._finished:
            raise ValueError("call begin_key_group before writing")
        # A key written to the wrong group would be invisible after a rescale: refuse it.
        actual = key_group_for_key_bytes(key_bytes, self._max_parallelism)
        if actual != self._current:
            raise ValueError(f"key belongs to key group {actual}, not {self._current}")
        if len(value) > MAX_VALUE_SIZE:
            raise ValueError(f"value of {len(value)} bytes is above the 4 GiB limit")
        self._body += (key_bytes, U32.pack(len(value)), bytes(value))
        self._entries += 1

    def finish(self) -> tuple[int, ...]:
        """Write the remaining (empty) groups; return one offset per key group."""
        if not self._finished:
            if self._current is None:
                self.begin_key_group(self._range.start)
            if self._current != self._range.end:
                self.begin_key_group(self._range.end)
            self._flush_group()
            self._finished = True
        return tuple(self._offsets)

    @property
    def key_group_range(self) -> KeyGroupRange:
        return self._range

    def handle(self, stream: StreamStateHandle) -> KeyGroupsStateHandle:
        """The state handle of what was written, given the stream's handle."""
        return KeyGroupsStateHandle(self._range, self.finish(), stream)


def write_keyed_state(
    stream: StateOutputStream,
    items: Iterable[tuple[Key, bytes]],
    key_group_range: KeyGroupRange,
    max_parallelism: int,
) -> KeyGroupsStateHandle:
    """Write (key, value) pairs in any order as one keyed-state stream, close it, and
    return its handle. Sorts by key group (and key bytes, for reproducible files)."""
    encoded = sorted(
        (key_group_for_key_bytes(kb, max_parallelism), kb, value)
        for kb, value in ((canonical_key_bytes(k), v) for k, v in items)
    )
    writer = KeyedStateWriter(stream, key_group_range, max_parallelism)
    current = None
    previous_key: bytes | None = None
    for key_group, key_bytes, value in encoded:
        if key_bytes == previous_key:
            # Two values for one key (e.g. 0.0 and -0.0, one key here): which one a
            # restore would keep is undefined, so refuse.
            raise ValueError(f"key {key_bytes!r} given twice (as canonical bytes)")
        previous_key = key_bytes
        if key_group != current:
            writer.begin_key_group(key_group)
            current = key_group
        writer.write_encoded(key_bytes, value)
    offsets = writer.finish()
    return KeyGroupsStateHandle(key_group_range, offsets, stream.close_and_get_handle())


class OperatorStateWriter:
    """Writes one subtask's operator (non-keyed) list states into one stream.

    >>> import io
    >>> w = OperatorStateWriter(io.BytesIO())
    >>> w.add("offsets", DistributionMode.SPLIT_DISTRIBUTE, b"partition-0:17")
    >>> w.states()["offsets"].offsets
    (0,)
    """

    def __init__(self, stream: OutputStream, *, start_position: int = 0) -> None:
        self._stream = stream
        self._position = start_position
        self._states: dict[str, tuple[DistributionMode, list[int]]] = {}

    def add(self, name: str, mode: DistributionMode, element: bytes) -> None:
        """Append one element to list state ``name`` (declared with ``mode``)."""
        if not name:
            raise ValueError("operator state needs a name")
        if len(element) > MAX_VALUE_SIZE:
            raise ValueError(f"element of {len(element)} bytes is above the 4 GiB limit")
        known_mode, offsets = self._states.setdefault(name, (mode, []))
        if known_mode is not mode:
            raise ValueError(f"state {name!r} is {known_mode}, not {mode}")
        offsets.append(self._position)
        data = U32.pack(len(element)) + bytes(element)
        self._stream.write(data)
        self._position += len(data)

    def declare(self, name: str, mode: DistributionMode) -> None:
        """Record an empty list state, so that its mode is known on restore."""
        self._states.setdefault(name, (mode, []))

    def states(self) -> dict[str, StateMetaInfo]:
        return {n: StateMetaInfo(tuple(o), m) for n, (m, o) in self._states.items()}

    def handle(self, stream: StreamStateHandle) -> OperatorStateHandle:
        return OperatorStateHandle(self.states(), stream)
