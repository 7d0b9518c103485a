"""The executor side of the on-disk (RocksDB) state backend: the epoch, snapshot and
load tasks for state that lives in each subtask's local store (store.py).

The state RDD holds, per subtask, ``(Slot(i), StoreToken)`` and, if any,
``(Slot(i), operator state)``. A token is cached on the executor whose task wrote the
store, and Spark prefers that host for the next task of the subtask (with the locality
waits of runtime/spark_session.STATE_IN_PLACE), so a subtask's tasks follow its store. A task that
lands elsewhere finds no store (or another one) and fails; Spark retries it. When the
executor is lost, its cached tokens go with it and Spark recomputes them from lineage:
the load from the last snapshot (which builds the store again), then each epoch since,
from the same source ranges — the rebuild from the last checkpoint plus the
deterministic re-read of the source ranges since, done by Spark's own recovery.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.checkpoint import IncrementalKeyedStateHandle, KeyGroupRange, OperatorSubtaskState
from sparkpoint.pipeline.api.keyed_state import TIMERS, KeyedStateBackend
from sparkpoint.pipeline.api.operator_state import OperatorStateStore
from sparkpoint.pipeline.api.timers import EVENT_TIME, PROCESSING_TIME, Timer, timers_of
from sparkpoint.pipeline.api.ttl import live_store_entries, now_ms
from sparkpoint.pipeline.runtime.keyed_epoch import (
    EpochParameters,
    epoch_outputs,
    run_function,
    uses_timers,
)
from sparkpoint.pipeline.runtime.partitioner import Slot
from sparkpoint.pipeline.runtime.records import NewState, Record, Result
from sparkpoint.pipeline.state import pickles
from sparkpoint.pipeline.state.backend import StoreSettings
from sparkpoint.pipeline.state.rocksdb.client import RemoteStore, StoreServerClient, stop_server
from sparkpoint.pipeline.state.rocksdb.files import is_whole, restore_whole, snapshot_store
from sparkpoint.pipeline.state.rocksdb.store import (
    KEY_GROUP,
    StoreMismatch,
    StoreToken,
    SubtaskStore,
    state_key,
    timer_index_key,
)
from sparkpoint.pipeline.state.snapshots import (
    attempt,
    keyed_entries,
    restored_operator_state,
    write_operator_snapshot,
    write_snapshot,
)
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.statefiles.keygroups import key_group_for_key_bytes, key_group_range_for_subtask
from sparkpoint.statefiles.keys import canonical_key_bytes, decode_key
from sparkpoint.storage.location import CheckpointLocation


@dataclass(frozen=True, slots=True)
class StorePlace:
    """Where the stores of one driver process live on a host:
    ``<root>/sparkpoint-state/<job>/<process tag>/<operator uid>/<subtask>``, root ``local_dir``
    or the system's temporary directory. Per host, not per executor: Spark's placement of
    an epoch's task follows its state partition to the host (the union of state and
    records prefers hosts, not executors), so any executor of that host finds the store.
    The stores of ``<process tag>`` stay open in that host's store server (server.py),
    which every task reaches through its client (client.py)."""

    job_id: str
    process_tag: str
    operator_uid: str
    settings: StoreSettings
    local_dir: str | None = None

    @property
    def server_directory(self) -> Path:
        root = Path(self.local_dir or tempfile.gettempdir(), "sparkpoint-state")
        return root / self.job_id / self.process_tag

    def path(self, index: int) -> Path:
        return self.server_directory / self.operator_uid / str(index)

    def client(self) -> StoreServerClient:
        return StoreServerClient(self.server_directory, self.settings)

    def open(self, token: StoreToken) -> RemoteStore:
        store = self.client().open_existing(self.path(token.index))
        if store is None:
            raise StoreMismatch(
                f"subtask {token.index}: no store at {self.path(token.index)} (the task runs "
                "on another executor than its store)"
            )
        return store


def _split(
    items: Iterable[tuple[Any, tuple[Any, ...]]],
) -> tuple[StoreToken, dict[str, Any] | None, list[tuple[Any, Any, Any]]]:
    token: StoreToken | None = None
    operator_state: dict[str, Any] | None = None
    records: list[tuple[Any, Any, Any]] = []
    for key, element in items:
        if element[0] is Record:
            records.append((element[1], key, element[2]))
        elif isinstance(element[1], StoreToken):
            token = element[1]
        else:
            operator_state = element[1]
    if token is None:
        raise RuntimeError("no store token in the state partition")
    records.sort(key=lambda r: r[0])
    return token, operator_state, records


@dataclass(frozen=True, slots=True)
class RocksEpochTask:
    """One epoch of one subtask against its store: reads the entries of the keys its
    records touch (one multi-get), runs the function on them, and writes the changed
    ones back in one batch with the next version (store.py)."""

    parameters: EpochParameters
    place: StorePlace
    max_parallelism: int

    def __call__(
        self, index: int, items: Iterable[tuple[Any, tuple[Any, ...]]]
    ) -> Iterator[Result]:
        token, operator_state, records = _split(items)
        store = self.place.open(token)
        try:
            store.prepare_step(token)
            key_bytes: dict[Any, bytes] = {}
            for _, key, _ in records:
                if key not in key_bytes and not isinstance(key, Slot):  # Slot: broadcast
                    kb = canonical_key_bytes(key)
                    group = key_group_for_key_bytes(kb, self.max_parallelism)
                    key_bytes[key] = state_key(group, kb)
            if uses_timers(self.parameters.function):
                for store_key in self._due_timer_keys(store):
                    key_bytes.setdefault(decode_key(store_key[KEY_GROUP.size :]), store_key)
            old = dict(zip(key_bytes, store.get_many(list(key_bytes.values())), strict=True))
            entries = {k: pickles.loads(v) for k, v in old.items() if v is not None}
            timers_before = {k: timers_of(e) for k, e in entries.items()}
            backend = KeyedStateBackend(entries)
            operators = OperatorStateStore(operator_state)
            ran = run_function(self.parameters, backend, operators, index, records)
            changes = []
            for key, before in old.items():
                entry = backend.entries.get(key)
                after = None if entry is None else pickles.dumps(entry)
                if after != before:
                    changes.append((key_bytes[key], before, after))
                    changes.extend(
                        timer_index_changes(
                            key_bytes[key], timers_before.get(key, ()), timers_of(entry)
                        )
                    )
            new_token = store.commit_step(token, changes)
        finally:
            store.close()
        yield NewState, Slot(index), new_token
        yield from epoch_outputs(index, operators, ran)

    def _due_timer_keys(self, store: RemoteStore) -> Iterator[bytes]:
        time = self.parameters.time
        yield from store.due_timer_keys(EVENT_TIME, time.watermark)
        yield from store.due_timer_keys(PROCESSING_TIME, time.processing_time_ms)


def timer_index_changes(
    store_key: bytes, before: tuple[Timer, ...], after: tuple[Timer, ...]
) -> Iterator[tuple[bytes, bytes | None, bytes | None]]:
    """The timer-index entries of one key that a step adds and removes."""
    old, new = set(before), set(after)
    for ts, domain in old - new:
        yield timer_index_key(domain, ts, store_key), b"", None
    for ts, domain in new - old:
        yield timer_index_key(domain, ts, store_key), None, b""


def with_timer_index(entries: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """Store entries and the timer-index entries of their timers (a store built from
    key-group streams, which carry timers in the entries only)."""
    for store_key, value in entries:
        yield store_key, value
        if TIMERS.encode() in value:  # cheap test before unpickling
            for ts, domain in timers_of(pickles.loads(value)):
                yield timer_index_key(domain, ts, store_key), b""


@dataclass(frozen=True, slots=True)
class RocksSnapshotTask:
    """Subtask ``index``'s snapshot in the canonical full format (docs/state-files.md),
    one ordered scan of its store; yields ``(index, state or reason, token)``. A store
    that is not the one the token names declines the checkpoint."""

    location: CheckpointLocation
    operator_uid: str
    parallelism: int
    max_parallelism: int
    place: StorePlace
    #: Per subtask, the incremental handle of the last completed checkpoint (or None);
    #: None for a full snapshot in the canonical format (savepoints).
    base: tuple[IncrementalKeyedStateHandle | None, ...] | None = None

    def __call__(
        self, index: int, items: Iterable[tuple[Any, Any]]
    ) -> Iterator[tuple[int, Any, StoreToken | None]]:
        token, operator_state = None, {}
        for _, value in items:
            if isinstance(value, StoreToken):
                token = value
            else:
                operator_state = value
        if token is None:
            yield index, "no store token in the state partition", None
            return
        try:
            store = self.place.open(token)
        except RuntimeError as exc:
            yield index, str(exc), None
            return
        try:
            if not store.matches(token):
                yield index, f"subtask {index}: store is not at {token}", None
                return
            groups = key_group_range_for_subtask(self.max_parallelism, self.parallelism, index)
            if self.base is None:
                keyed = live_store_entries(store.entries(groups.start, groups.end), now_ms())
                yield index, write_snapshot(self, index, keyed, operator_state), token
            else:
                yield index, self._incremental(store, index, groups, operator_state), token
        finally:
            store.close()

    def _incremental(
        self,
        store: RemoteStore,
        index: int,
        groups: KeyGroupRange,
        operator_state: dict[str, Any],
    ) -> OperatorSubtaskState | str:
        base = self.base[index] if self.base else None
        try:
            keyed, _ = snapshot_store(
                store, self.location, self.operator_uid, index, attempt(), groups, base
            )
            operator = write_operator_snapshot(self, index, operator_state)
        except Exception as exc:  # any failure to write is this subtask's decline reason
            return f"{type(exc).__name__}: {exc}"
        return OperatorSubtaskState(keyed=(keyed,), operator=operator)


@dataclass(frozen=True, slots=True)
class RocksLoadTask:
    """Builds subtask ``index``'s store from its handles (restore, or a rebuild after
    its executor was lost) — or, right after a snapshot, keeps the store it was taken
    from when it is still here at that version (``keep``)."""

    subtasks: tuple[SubtaskRestore, ...]
    max_parallelism: int
    place: StorePlace
    keep: tuple[StoreToken | None, ...] = ()

    def __call__(self, index: int, markers: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        for _ in markers:
            pass
        subtask = self.subtasks[index]
        path = self.place.path(index)
        client = self.place.client()
        wanted = self.keep[index] if self.keep else None
        store = None if wanted is None else client.open_existing(path)
        if store is None or wanted is None or not store.matches(wanted):
            client.release(path)  # the server closes it: this task builds it again
            self._build(subtask, path).close()
            store = client.open_existing(path)
            if store is None:
                raise StoreMismatch(f"subtask {index}: the store built at {path} is gone")
        token = store.token(index)
        yield Slot(index), token
        yield from restored_operator_state(subtask)

    def _build(self, subtask: SubtaskRestore, path: Path) -> SubtaskStore:
        whole = subtask.keyed[0] if len(subtask.keyed) == 1 else None
        if isinstance(whole, IncrementalKeyedStateHandle) and is_whole(
            whole, subtask.key_group_range
        ):
            return restore_whole(whole, path, self.place.settings)
        entries = with_timer_index(
            (state_key(group, key_bytes), value)
            for group, key_bytes, value in keyed_entries(subtask, self.max_parallelism, path.parent)
        )
        return SubtaskStore.create(path, self.place.settings, entries)


@dataclass(frozen=True, slots=True)
class RocksDBTasks:
    """The RocksDB backend's tasks for one keyed operator (state/tasks.py's
    BackendTasks): every task finds its subtask's store in ``place``."""

    operator_uid: str
    parallelism: int
    max_parallelism: int
    place: StorePlace

    def epoch(self, parameters: EpochParameters) -> RocksEpochTask:
        return RocksEpochTask(parameters, self.place, self.max_parallelism)

    def snapshot(
        self,
        location: CheckpointLocation,
        base: tuple[IncrementalKeyedStateHandle | None, ...] | None,
    ) -> RocksSnapshotTask:
        return RocksSnapshotTask(
            location, self.operator_uid, self.parallelism, self.max_parallelism, self.place, base
        )

    def load(self, subtasks: tuple[SubtaskRestore, ...], keep: tuple[Any, ...]) -> RocksLoadTask:
        return RocksLoadTask(subtasks, self.max_parallelism, self.place, keep)

    def close(self) -> None:
        """The job's driver is done: stop the store server of this host (it closes the
        stores). Servers on other hosts end when idle."""
        stop_server(self.place.server_directory)
