"""One subtask's keyed state in an embedded RocksDB (through ``rocksdict``), on the
executor's local disk (docs/pipeline.md, "State backends").

Layout of the store (raw bytes, no pickling by rocksdict)::

    key group (u16, big-endian) | canonical key bytes  →  pickled {state name → value}
    0xFE | state key                                   →  undo entry of the last step
    0xFF | "version" / "instance" / "undo of"          →  store version, instance, and
                                                          the version the undo entries undo

A key-group range is one contiguous key range (max parallelism ≤ 32768 fits in two
bytes), so a snapshot is one ordered scan and a rescale keeps one range. Values are the
same bytes the full snapshot format holds, so a snapshot copies them without re-pickling.

Versions make Spark's retries safe: a step (one epoch's task) reads the keys its records
touch, and writes the changed ones and the new version in ONE write batch at the end. A
task that dies before the batch leaves the store at the version it started from; one that
dies after it (while streaming its outputs) is retried, finds the store one step ahead and
rolls that step back. The undo of the last step (what it overwrote) is kept in memory
beside the open store, not written with the step: a store stays open across epochs in
its host's store server (server.py), so every change is written once. Closing the store
writes that undo into the store under 0xFE (the layout above), so a store reopened after
a clean close can still roll its last step back; a store one step ahead with no undo
(its server died) cannot, and is a :class:`StoreMismatch` like a lost store.
The instance id (random, per built store) tells a store apart from another one of the
same subtask, e.g. an older one on an executor that the subtask has left.
"""

from __future__ import annotations

import secrets
import shutil
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Checkpoint,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from sparkpoint.pipeline.state.backend import StoreSettings

KEY_GROUP = struct.Struct(">H")
U64 = struct.Struct(">Q")
#: The timer index: ``prefix, domain, timestamp, store key`` → empty, so an epoch finds
#: its due timers with one range scan per time domain (api/timers.py keeps the timers
#: themselves in the key's entry; the index is derived from them).
TIMER_PREFIX = b"\xfd"
UNDO_PREFIX = b"\xfe"
META_PREFIX = b"\xff"
VERSION_KEY = META_PREFIX + b"version"
INSTANCE_KEY = META_PREFIX + b"instance"
#: The version whose step the undo entries under 0xFE undo (written by a close).
UNDO_OF_KEY = META_PREFIX + b"undo of"
#: Undo entry tags: the key had no entry before the step, or had the bytes that follow.
UNDO_ABSENT, UNDO_VALUE = b"\x00", b"\x01"
#: Keys written per batch while building a store from a snapshot.
LOAD_BATCH = 20_000


class StoreMismatch(RuntimeError):
    """The local store is not the one (or not at the version) a task expects: the task
    ran on another executor than its subtask's store, or the store was lost."""


@dataclass(frozen=True, slots=True)
class StoreToken:
    """What the state RDD holds for a subtask in place of its state: which store (the
    instance) at which version. Tiny, cached on the executor that holds the store, so
    Spark prefers that executor for the subtask's next task."""

    index: int
    version: int
    instance: str


def _options(settings: StoreSettings) -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(settings.write_buffer_bytes)
    options.set_max_write_buffer_number(settings.write_buffers)
    table = BlockBasedOptions()
    table.set_block_cache(Cache(settings.block_cache_bytes))
    table.set_bloom_filter(10, False)
    # Index and filter blocks count against the cache: memory stays bounded by it.
    table.set_cache_index_and_filter_blocks(True)
    options.set_block_based_table_factory(table)
    return options


def state_key(key_group: int, key_bytes: bytes) -> bytes:
    return KEY_GROUP.pack(key_group) + key_bytes


def timer_index_key(domain: int, timestamp: int, store_key: bytes) -> bytes:
    return TIMER_PREFIX + bytes((domain,)) + U64.pack(timestamp + 2**63) + store_key


def due_timer_bounds(domain: int, up_to: int) -> tuple[bytes, bytes, int]:
    """``[lower, upper)`` of the timer-index keys of ``domain`` due at ``up_to``, and
    where the store key starts in them."""
    lower = TIMER_PREFIX + bytes((domain,))
    upper = lower + U64.pack(min(up_to + 2**63 + 1, 2**64 - 1))
    return lower, upper, len(lower) + U64.size


def key_group_bounds(start: int, end: int) -> tuple[bytes, bytes]:
    """``[lower, upper)`` of the store keys of key groups ``start..end``."""
    return KEY_GROUP.pack(start), (KEY_GROUP.pack(end + 1) if end + 1 < 0x10000 else UNDO_PREFIX)


class SubtaskStore:
    """An open store, held by one process at a time (RocksDB's lock file): the host's
    store server for the epochs of a job (server.py), or a task building or reading a
    store of its own."""

    def __init__(self, path: Path, settings: StoreSettings) -> None:
        self.path = path
        self._db = Rdict(str(path), _options(settings))
        #: The last step's undo, ``(key, old bytes or None)``, and the version it made.
        self._undo: list[tuple[bytes, bytes | None]] = []
        self._undo_version = -1
        #: Undo entries in the store's data (written by a close, or an older layout):
        #: removed with the next step.
        self._undo_on_disk = self._has_undo_entries()

    # -- building -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: Path,
        settings: StoreSettings,
        entries: Iterable[tuple[bytes, bytes]],
    ) -> SubtaskStore:
        """A new store at ``path`` (whatever was there is removed) holding ``entries``
        (store key, value), at version 0 with a new instance id."""
        if path.exists():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        store = cls(path, settings)
        bulk = WriteOptions()
        bulk.disable_wal = True  # flushed below: a crash before that rebuilds anyway
        batch = WriteBatch(raw_mode=True)
        for key, value in entries:
            batch.put(key, value)
            if len(batch) >= LOAD_BATCH:
                store._db.write(batch, bulk)
                batch = WriteBatch(raw_mode=True)
        batch.put(VERSION_KEY, U64.pack(0))
        batch.put(INSTANCE_KEY, secrets.token_hex(8).encode())
        store._db.write(batch, bulk)
        store._db.flush()
        return store

    @classmethod
    def open_existing(cls, path: Path, settings: StoreSettings) -> SubtaskStore | None:
        if not (path / "CURRENT").exists():
            return None
        return cls(path, settings)

    # -- versions ---------------------------------------------------------------------

    @property
    def version(self) -> int:
        raw = self._db.get(VERSION_KEY)
        return -1 if raw is None else U64.unpack(raw)[0]

    @property
    def instance(self) -> str:
        raw = self._db.get(INSTANCE_KEY)
        return "" if raw is None else raw.decode()

    def token(self, index: int) -> StoreToken:
        return StoreToken(index, self.version, self.instance)

    def matches(self, token: StoreToken) -> bool:
        return self.instance == token.instance and self.version == token.version

    def prepare_step(self, token: StoreToken) -> None:
        """Bring the store to ``token``'s version before the step after it runs: as it
        is, or one step back (the step ran and its task was retried); anything else is a
        store this task cannot use."""
        if self.instance != token.instance:
            raise StoreMismatch(
                f"subtask {token.index}: the store at {self.path} is instance "
                f"{self.instance or 'none'}, the task expects {token.instance} (the task runs "
                "on another executor than its store)"
            )
        version = self.version
        if version == token.version + 1:
            self._roll_back(token.version)
        elif version != token.version:
            raise StoreMismatch(
                f"subtask {token.index}: the store at {self.path} is at version {version}, "
                f"the task expects {token.version} or {token.version + 1}"
            )

    def _roll_back(self, version: int) -> None:
        batch = WriteBatch(raw_mode=True)
        if self._undo_version == version + 1:
            undo: Iterable[tuple[bytes, bytes | None]] = self._undo
        elif self._undo_on_disk:
            undo = self._undo_entries()
        else:
            raise StoreMismatch(
                f"the store at {self.path} is one step ahead of version {version} and "
                "has no undo of that step (its server ended without closing it)"
            )
        for key, old in undo:
            if old is None:
                batch.delete(key)
            else:
                batch.put(key, old)
        batch.delete_range(UNDO_PREFIX, META_PREFIX)
        batch.delete(UNDO_OF_KEY)
        batch.put(VERSION_KEY, U64.pack(version))
        self._db.write(batch)
        self._undo, self._undo_version, self._undo_on_disk = [], -1, False

    def _undo_entries(self) -> list[tuple[bytes, bytes | None]]:
        return [
            (undo_key[len(UNDO_PREFIX) :], None if entry[:1] == UNDO_ABSENT else entry[1:])
            for undo_key, entry in self._db.items(
                from_key=UNDO_PREFIX, read_opt=_bounded(UNDO_PREFIX, META_PREFIX)
            )
        ]

    def _has_undo_entries(self) -> bool:
        if self._db.get(UNDO_OF_KEY) is not None:
            return True
        keys = self._db.keys(from_key=UNDO_PREFIX, read_opt=_bounded(UNDO_PREFIX, META_PREFIX))
        return next(iter(keys), None) is not None  # the layout before "undo of"

    # -- a step -----------------------------------------------------------------------

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        return list(self._db.get(keys))

    def commit_step(
        self,
        token: StoreToken,
        changes: Iterable[tuple[bytes, bytes | None, bytes | None]],
    ) -> StoreToken:
        """Write one step atomically: ``(key, old bytes or None, new bytes or None)`` for
        each changed key, and the next version; the old bytes are kept (in memory) as the
        step's undo. Returns the token of the new version."""
        batch = WriteBatch(raw_mode=True)
        if self._undo_on_disk:
            batch.delete_range(UNDO_PREFIX, META_PREFIX)
            batch.delete(UNDO_OF_KEY)
        undo = []
        for key, old, new in changes:
            undo.append((key, old))
            if new is None:
                batch.delete(key)
            else:
                batch.put(key, new)
        batch.put(VERSION_KEY, U64.pack(token.version + 1))
        self._db.write(batch)
        self._undo, self._undo_version, self._undo_on_disk = undo, token.version + 1, False
        return StoreToken(token.index, token.version + 1, token.instance)

    # -- reading it all ---------------------------------------------------------------

    def due_timer_keys(self, domain: int, up_to: int) -> Iterator[bytes]:
        """The store keys with a timer of ``domain`` at or before ``up_to`` (one range
        scan of the timer index; a key with several due timers comes once per timer)."""
        lower, upper, skip = due_timer_bounds(domain, up_to)
        for key in self._db.keys(from_key=lower, read_opt=_bounded(lower, upper)):
            yield key[skip:]

    def entries(self, start: int, end: int) -> Iterator[tuple[int, bytes, bytes]]:
        """``(key group, canonical key bytes, value)`` of key groups ``start..end``, in
        key-group and key order (one range scan)."""
        lower, upper = key_group_bounds(start, end)
        for key, value in self._db.items(from_key=lower, read_opt=_bounded(lower, upper)):
            yield KEY_GROUP.unpack_from(key)[0], key[KEY_GROUP.size :], value

    def page(self, lower: bytes, upper: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries of ``[lower, upper)``, in key order: a range scan in
        pieces, for a store read through its server."""
        items = self._db.items(from_key=lower, read_opt=_bounded(lower, upper))
        return list(islice(items, limit))

    def checkpoint(self, target: Path) -> None:
        """A consistent copy at ``target`` (a new directory): the memtable is flushed,
        SST files are hard-linked, the manifest and options copied."""
        Checkpoint(self._db).create_checkpoint(str(target))

    def close(self) -> None:
        """Close the store, writing the last step's undo into it first (so a retry of
        that step still finds it after the store is opened again)."""
        if self._undo_version >= 0 and self._undo_version == self.version:
            batch = WriteBatch(raw_mode=True)
            for key, old in self._undo:
                batch.put(UNDO_PREFIX + key, UNDO_ABSENT if old is None else UNDO_VALUE + old)
            batch.put(UNDO_OF_KEY, U64.pack(self._undo_version))
            self._db.write(batch)
        self._undo = []
        self._db.close()


def _bounded(lower: bytes, upper: bytes) -> ReadOptions:
    options = ReadOptions()
    options.set_iterate_lower_bound(lower)
    options.set_iterate_upper_bound(upper)
    return options
