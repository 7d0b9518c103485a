"""Keyed state: descriptors, the per-subtask backend, and the views a function uses.

A function declares its state once (``ctx.get_state(ValueStateDescriptor("total", 0))``)
and the returned view always reads and writes the entry of the key being processed, as
in Flink. The backend holds, per key, a dict of state name → value; a key whose states
are all empty is dropped, so state does not grow with keys seen once and then cleared.
A descriptor's ``ttl`` (ttl.py) lets values expire: an expired value is never
returned, and is dropped when read or at the next snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sparkpoint.pipeline.api.ttl import StateTtlConfig, TtlValue, now_ms
from sparkpoint.statefiles.keys import Key

V = TypeVar("V")
K = TypeVar("K")

_MISSING = object()
#: The state name a key's timers are kept under (timers.py); not for functions to use.
TIMERS = "_timers"
RESERVED_NAMES = frozenset({TIMERS})


@dataclass(frozen=True, slots=True)
class ValueStateDescriptor(Generic[V]):
    """One value per key; ``default`` is what :meth:`ValueState.value` gives before any
    update (and once the value has expired, with a ``ttl``)."""

    name: str
    default: Any = None
    ttl: StateTtlConfig | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class ListStateDescriptor(Generic[V]):
    """A list of values per key; with a ``ttl`` the list lives and expires as one value."""

    name: str
    ttl: StateTtlConfig | None = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True)
class MapStateDescriptor(Generic[K, V]):
    """A map per key; with a ``ttl`` each of its entries expires on its own."""

    name: str
    ttl: StateTtlConfig | None = field(default=None, kw_only=True)


StateDescriptor = (
    ValueStateDescriptor[Any] | ListStateDescriptor[Any] | MapStateDescriptor[Any, Any]
)


class KeyedStateBackend:
    """The keyed state of one subtask: ``key → {state name → value}``.

    ``processing_time_ms`` is the instant state TTLs go by (ttl.py): the epoch's,
    so that a retried task sees the same state; the wall clock when not given."""

    def __init__(
        self,
        entries: dict[Key, dict[str, Any]] | None = None,
        *,
        processing_time_ms: int | None = None,
    ) -> None:
        self.entries: dict[Key, dict[str, Any]] = entries if entries is not None else {}
        self.processing_time_ms = now_ms() if processing_time_ms is None else processing_time_ms
        self.current_key: Key = None
        self._has_key = False
        self._declared: dict[str, StateDescriptor] = {}

    def set_current_key(self, key: Key) -> None:
        self.current_key = key
        self._has_key = True

    def declare(self, descriptor: StateDescriptor) -> None:
        if descriptor.name in RESERVED_NAMES:
            raise ValueError(f"state name {descriptor.name!r} is reserved (the key's timers)")
        known = self._declared.setdefault(descriptor.name, descriptor)
        if type(known) is not type(descriptor):
            raise ValueError(
                f"state {descriptor.name!r} declared as {type(known).__name__} and "
                f"{type(descriptor).__name__}"
            )
        if known.ttl != descriptor.ttl:
            raise ValueError(
                f"state {descriptor.name!r} declared with ttl {known.ttl} and {descriptor.ttl}"
            )

    def get(self, name: str) -> Any:
        self._require_key()
        entry = self.entries.get(self.current_key)
        return _MISSING if entry is None else entry.get(name, _MISSING)

    def get_or_none(self, name: str) -> Any:
        found = self.get(name)
        return None if found is _MISSING else found

    def put(self, name: str, value: Any) -> None:
        self._require_key()
        self.entries.setdefault(self.current_key, {})[name] = value

    def remove(self, name: str) -> None:
        self._require_key()
        entry = self.entries.get(self.current_key)
        if entry is not None:
            entry.pop(name, None)
            if not entry:
                del self.entries[self.current_key]

    def _require_key(self) -> None:
        if not self._has_key:
            raise RuntimeError("keyed state is only available while processing an element")

    def items(self) -> Iterator[tuple[Key, dict[str, Any]]]:
        return iter(self.entries.items())


class _Ttl:
    """A view's side of its descriptor's TTL: what it stores (a :class:`TtlValue` stamped
    with the backend's processing time) and what it reads back (never an expired value).
    Without a TTL, values are stored as they are; a TtlValue stored under an earlier TTL
    still expires by it."""

    def __init__(self, backend: KeyedStateBackend, config: StateTtlConfig | None) -> None:
        self._backend = backend
        self.config = config

    @property
    def refreshed_on_read(self) -> bool:
        return self.config is not None and self.config.refreshed_on_read

    def wrap(self, value: Any) -> Any:
        if self.config is None:
            return value
        return TtlValue(value, self._backend.processing_time_ms, self.config.ttl_ms)

    def unwrap(self, stored: Any) -> Any:
        """The stored value, or ``_MISSING`` when it has expired."""
        if not isinstance(stored, TtlValue):
            return stored
        if stored.expired(self._backend.processing_time_ms, self.config):
            return _MISSING
        return stored.value


class ValueState(Generic[V]):
    """``value()``, ``update(v)``, ``clear()`` for the current key."""

    def __init__(self, backend: KeyedStateBackend, descriptor: ValueStateDescriptor[V]) -> None:
        self._backend = backend
        self._name = descriptor.name
        self._default = descriptor.default
        self._ttl = _Ttl(backend, descriptor.ttl)

    def value(self) -> V:
        found = self._backend.get(self._name)
        if found is _MISSING:
            return self._default
        value = self._ttl.unwrap(found)
        if value is _MISSING:
            self._backend.remove(self._name)
            return self._default
        if self._ttl.refreshed_on_read:
            self._backend.put(self._name, self._ttl.wrap(value))
        return value

    def update(self, value: V) -> None:
        if value is None:
            self._backend.remove(self._name)
        else:
            self._backend.put(self._name, self._ttl.wrap(value))

    def clear(self) -> None:
        self._backend.remove(self._name)


class ListState(Generic[V]):
    """A list for the current key; ``get()`` returns a copy."""

    def __init__(self, backend: KeyedStateBackend, descriptor: ListStateDescriptor[V]) -> None:
        self._backend = backend
        self._name = descriptor.name
        self._ttl = _Ttl(backend, descriptor.ttl)

    def _list(self) -> list[V] | None:
        found = self._backend.get(self._name)
        if found is _MISSING:
            return None
        values = self._ttl.unwrap(found)
        if values is _MISSING:
            self._backend.remove(self._name)
            return None
        return values

    def get(self) -> list[V]:
        current = self._list()
        if current is not None and self._ttl.refreshed_on_read:
            self._backend.put(self._name, self._ttl.wrap(current))
        return list(current or ())

    def add(self, value: V) -> None:
        current = self._list()
        if current is None:
            self._backend.put(self._name, self._ttl.wrap([value]))
        else:
            current.append(value)
            self._backend.put(self._name, self._ttl.wrap(current))  # a new last write

    def add_all(self, values: Iterable[V]) -> None:
        for value in values:
            self.add(value)

    def update(self, values: Iterable[V]) -> None:
        values = list(values)
        if values:
            self._backend.put(self._name, self._ttl.wrap(values))
        else:
            self._backend.remove(self._name)

    def clear(self) -> None:
        self._backend.remove(self._name)


class MapState(Generic[K, V]):
    """A map for the current key; with a TTL, each entry is stored, refreshed and expires
    on its own (as Flink does per user key)."""

    def __init__(self, backend: KeyedStateBackend, descriptor: MapStateDescriptor[K, V]) -> None:
        self._backend = backend
        self._name = descriptor.name
        self._ttl = _Ttl(backend, descriptor.ttl)

    def _stored(self) -> dict[K, Any] | None:
        found = self._backend.get(self._name)
        return None if found is _MISSING else found

    def _read(self, stored: dict[K, Any], key: K) -> Any:
        """The live value of ``key`` (refreshed on read when the TTL says so), or
        ``_MISSING``; an expired one is dropped."""
        value = self._ttl.unwrap(stored.get(key, _MISSING))
        if value is _MISSING:
            if key in stored:
                self._forget(stored, key)
        elif self._ttl.refreshed_on_read:
            stored[key] = self._ttl.wrap(value)
        return value

    def _forget(self, stored: dict[K, Any], key: K) -> None:
        del stored[key]
        if not stored:
            self._backend.remove(self._name)

    def _live(self) -> list[tuple[K, V]]:
        stored = self._stored()
        if stored is None:
            return []
        live = []
        for key in list(stored):
            value = self._read(stored, key)
            if value is not _MISSING:
                live.append((key, value))
        return live

    def get(self, key: K, default: V | None = None) -> V | None:
        stored = self._stored()
        value = _MISSING if stored is None else self._read(stored, key)
        return default if value is _MISSING else value

    def put(self, key: K, value: V) -> None:
        stored = self._stored()
        if stored is None:
            self._backend.put(self._name, {key: self._ttl.wrap(value)})
        else:
            stored[key] = self._ttl.wrap(value)

    def contains(self, key: K) -> bool:
        stored = self._stored()
        return stored is not None and self._read(stored, key) is not _MISSING

    def remove(self, key: K) -> None:
        stored = self._stored()
        if stored is not None and key in stored:
            self._forget(stored, key)

    def items(self) -> list[tuple[K, V]]:
        return self._live()

    def keys(self) -> list[K]:
        return [k for k, _ in self._live()]

    def values(self) -> list[V]:
        return [v for _, v in self._live()]

    def is_empty(self) -> bool:
        return not self._live()

    def clear(self) -> None:
        self._backend.remove(self._name)
