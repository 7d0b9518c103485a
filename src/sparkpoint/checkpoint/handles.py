"""State handles: where a piece of checkpointed state is and how to find parts of it.

A *stream handle* is the bytes themselves (inline, for small state) or a file (path, size).
A keyed handle adds the key-group range its stream covers and one offset per key group, so
a reader seeks straight to the groups it owns. An operator-state handle adds, per state
name, the distribution mode and the offset of every element.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sparkpoint.checkpoint.errors import InvalidCheckpointValue
from sparkpoint.checkpoint.keygroups import KeyGroupRange


@dataclass(frozen=True, slots=True)
class FileStateHandle:
    """State in a file. ``path`` is a URI or path; in a savepoint it is relative to the
    savepoint directory (savepoints are relocatable)."""

    path: str
    size: int

    def __post_init__(self) -> None:
        if not self.path:
            raise InvalidCheckpointValue("file state handle with an empty path")
        if self.size < 0:
            raise InvalidCheckpointValue(
                f"file state handle {self.path}: negative size {self.size}"
            )

    @property
    def state_size(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class InlineStateHandle:
    """Small state kept inside `_metadata` itself; ``name`` identifies it in listings."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def state_size(self) -> int:
        return len(self.data)


StreamStateHandle = FileStateHandle | InlineStateHandle


def _check_offsets(offsets: tuple[int, ...], size: int, what: str) -> None:
    previous = 0
    for offset in offsets:
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidCheckpointValue(f"{what}: offset {offset!r} is not an integer")
        if offset < previous:
            raise InvalidCheckpointValue(
                f"{what}: offsets must not decrease ({offset} after {previous})"
            )
        if offset > size:
            raise InvalidCheckpointValue(f"{what}: offset {offset} beyond stream size {size}")
        previous = offset


@dataclass(frozen=True, slots=True)
class KeyGroupsStateHandle:
    """Keyed state of a contiguous key-group range, written in key-group order.

    ``offsets[i]`` is where key group ``key_group_range.start + i`` begins in ``stream``;
    a group ends where the next begins (the last one at the end of the stream).
    """

    key_group_range: KeyGroupRange
    offsets: tuple[int, ...]
    stream: StreamStateHandle

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", tuple(self.offsets))
        if len(self.offsets) != self.key_group_range.num_key_groups:
            raise InvalidCheckpointValue(
                f"keyed state handle for key groups {self.key_group_range} has "
                f"{len(self.offsets)} offsets, expected {self.key_group_range.num_key_groups}"
            )
        _check_offsets(self.offsets, self.stream.size, f"keyed state {self.key_group_range}")

    def offset_of(self, key_group: int) -> int:
        return self.offsets[self.key_group_range.index_of(key_group)]

    def intersection(self, key_groups: KeyGroupRange) -> KeyGroupsStateHandle | None:
        """The part of this handle inside ``key_groups`` (same stream, fewer offsets), or
        ``None`` when they do not overlap."""
        overlap = self.key_group_range.intersection(key_groups)
        if overlap.is_empty:
            return None
        if overlap == self.key_group_range:
            return self
        first = overlap.start - self.key_group_range.start
        return KeyGroupsStateHandle(
            overlap, self.offsets[first : first + overlap.num_key_groups], self.stream
        )

    @property
    def first_offset(self) -> int:
        """Where this handle's bytes begin in its stream."""
        return self.offsets[0] if self.offsets else self.stream.size

    @property
    def streams(self) -> tuple[StreamStateHandle, ...]:
        return (self.stream,)


@dataclass(frozen=True, slots=True)
class StoreFile:
    """One file of an embedded store's snapshot: its name in the store's directory and
    where its bytes are (a file under ``<job>/shared/``, one of the checkpoint's own, or
    inline)."""

    name: str
    stream: StreamStateHandle

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name in (".", ".."):
            raise InvalidCheckpointValue(f"store file name {self.name!r} is not a plain name")


@dataclass(frozen=True, slots=True)
class IncrementalKeyedStateHandle:
    """Keyed state as the files of an embedded store (RocksDB) that held key groups
    ``store_range``; a reader takes only ``key_group_range`` from it (the whole store
    at unchanged parallelism, a part of it after a rescale).

    ``shared`` files (immutable SST files) live under ``<job>/shared/`` with names never
    reused, and later checkpoints reference them again instead of writing them anew;
    ``private`` files (the store's manifest and options) belong to this checkpoint.
    ``instance`` names the store the files came from. ``reused`` names the shared files
    an earlier checkpoint uploaded and this one only references again; every other file
    this checkpoint wrote itself (Flink's "checkpointed size" against its full size).
    """

    key_group_range: KeyGroupRange
    store_range: KeyGroupRange
    instance: str
    shared: tuple[StoreFile, ...]
    private: tuple[StoreFile, ...]
    reused: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shared", tuple(self.shared))
        object.__setattr__(self, "private", tuple(self.private))
        object.__setattr__(self, "reused", frozenset(self.reused))
        if self.key_group_range.intersection(self.store_range) != self.key_group_range:
            raise InvalidCheckpointValue(
                f"incremental keyed state: key groups {self.key_group_range} are not inside "
                f"the store's {self.store_range}"
            )
        names = [f.name for f in (*self.shared, *self.private)]
        if len(set(names)) != len(names):
            raise InvalidCheckpointValue(
                f"incremental keyed state {self.store_range}: a store file appears twice"
            )
        unknown = self.reused.difference(f.name for f in self.shared)
        if unknown:
            raise InvalidCheckpointValue(
                f"incremental keyed state {self.store_range}: reused files "
                f"{sorted(unknown)} are not among its shared files"
            )

    def intersection(self, key_groups: KeyGroupRange) -> IncrementalKeyedStateHandle | None:
        """The same files, read for the part of ``key_groups`` this handle covers."""
        overlap = self.key_group_range.intersection(key_groups)
        if overlap.is_empty:
            return None
        if overlap == self.key_group_range:
            return self
        return IncrementalKeyedStateHandle(
            overlap, self.store_range, self.instance, self.shared, self.private, self.reused
        )

    @property
    def state_size(self) -> int:
        """Every byte a restore reads: the full size, shared files included."""
        return sum(f.stream.size for f in (*self.shared, *self.private))

    @property
    def reused_size(self) -> int:
        """Bytes of the shared files an earlier checkpoint wrote (``reused``)."""
        return sum(f.stream.size for f in self.shared if f.name in self.reused)

    @property
    def checkpointed_size(self) -> int:
        """Bytes this checkpoint wrote: its private files and the shared files new in it."""
        return self.state_size - self.reused_size

    @property
    def streams(self) -> tuple[StreamStateHandle, ...]:
        return tuple(f.stream for f in (*self.shared, *self.private))


KeyedStateHandle = KeyGroupsStateHandle | IncrementalKeyedStateHandle


class DistributionMode(enum.StrEnum):
    """How operator (non-keyed) list state is redistributed on restore (Flink's names)."""

    SPLIT_DISTRIBUTE = "SPLIT_DISTRIBUTE"  # elements split evenly across new subtasks
    UNION = "UNION"  # every subtask gets the union of all elements
    BROADCAST = "BROADCAST"  # every subtask gets one full copy (all copies are equal)


@dataclass(frozen=True, slots=True)
class StateMetaInfo:
    """Per state name in an operator-state stream: element offsets and distribution mode."""

    offsets: tuple[int, ...]
    mode: DistributionMode

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", tuple(self.offsets))
        if not isinstance(self.mode, DistributionMode):
            raise InvalidCheckpointValue(f"distribution mode {self.mode!r} is unknown")


@dataclass(frozen=True, slots=True)
class OperatorStateHandle:
    """Operator list state of one subtask: one stream holding every named state."""

    states: Mapping[str, StateMetaInfo]
    stream: StreamStateHandle

    def __post_init__(self) -> None:
        object.__setattr__(self, "states", MappingProxyType(dict(self.states)))
        for name, info in self.states.items():
            if not name:
                raise InvalidCheckpointValue("operator state with an empty name")
            _check_offsets(
                tuple(sorted(info.offsets)), self.stream.size, f"operator state {name!r}"
            )

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.states.items())), self.stream))

    def __reduce__(self) -> tuple[type[OperatorStateHandle], tuple[object, ...]]:
        # A mappingproxy cannot be pickled; rebuild from a plain dict (Spark pickles
        # handles on their way from executors to the driver).
        return (type(self), (dict(self.states), self.stream))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OperatorStateHandle):
            return NotImplemented
        return dict(self.states) == dict(other.states) and self.stream == other.stream

    @property
    def first_offset(self) -> int:
        """Where this handle's bytes begin in its stream (its end when it holds none)."""
        return min((o for i in self.states.values() for o in i.offsets), default=self.stream.size)


def own_sizes(
    handles: Iterable[KeyGroupsStateHandle | OperatorStateHandle],
) -> list[int]:
    """Each handle's own byte count, in the order given: handles that share a stream (a
    subtask's keyed and operator state live in one file) split it where the next one
    begins, and the first one in a stream also owns the stream's header, so every byte of
    every stream is counted exactly once.

    >>> stream = FileStateHandle("process-0-0", 100)
    >>> keyed = KeyGroupsStateHandle(KeyGroupRange(0, 1), (13, 37), stream)
    >>> info = StateMetaInfo((70,), DistributionMode.UNION)
    >>> operator = OperatorStateHandle({"offsets": info}, stream)
    >>> own_sizes([keyed, operator])
    [70, 30]
    """
    handles = list(handles)
    starts: dict[StreamStateHandle, list[tuple[int, int]]] = {}
    for position, handle in enumerate(handles):
        starts.setdefault(handle.stream, []).append((handle.first_offset, position))
    sizes = [0] * len(handles)
    for stream, begins in starts.items():
        begins.sort()
        ends = [start for start, _ in begins[1:]] + [stream.size]
        for rank, ((start, position), end) in enumerate(zip(begins, ends, strict=True)):
            sizes[position] = end - (0 if rank == 0 else start)
    return sizes
