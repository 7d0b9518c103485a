"""Keyed state: descriptors, the per-subtask backend, and the views a function uses.

A function declares its state once (``ctx.get_state(ValueStateDescriptor("total", 0))``)
and the returned view always reads and writes the entry of the key being processed, as
in Flink. The backend holds, per key, a dict of state name → value; a key whose states
are all empty is dropped, so state does not grow with keys seen once and then cleared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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
    update."""

    name: str
    default: Any = None


@dataclass(frozen=True, slots=True)
class ListStateDescriptor(Generic[V]):
    """A list of values per key."""

    name: str


@dataclass(frozen=True, slots=True)
class MapStateDescriptor(Generic[K, V]):
    """A map per key."""

    name: str


StateDescriptor = (
    ValueStateDescriptor[Any] | ListStateDescriptor[Any] | MapStateDescriptor[Any, Any]
)


class KeyedStateBackend:
    """The keyed state of one subtask: ``key → {state name → value}``."""

    def __init__(self, entries: dict[Key, dict[str, Any]] | None = None) -> None:
        self.entries: dict[Key, dict[str, Any]] = entries if entries is not None else {}
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


class ValueState(Generic[V]):
    """``value()``, ``update(v)``, ``clear()`` for the current key."""

    def __init__(self, backend: KeyedStateBackend, descriptor: ValueStateDescriptor[V]) -> None:
        self._backend = backend
        self._name = descriptor.name
        self._default = descriptor.default

    def value(self) -> V:
        found = self._backend.get(self._name)
        return self._default if found is _MISSING else found

    def update(self, value: V) -> None:
        if value is None:
            self._backend.remove(self._name)
        else:
            self._backend.put(self._name, value)

    def clear(self) -> None:
        self._backend.remove(self._name)


class ListState(Generic[V]):
    """A list for the current key; ``get()`` returns a copy."""

    def __init__(self, backend: KeyedStateBackend, descriptor: ListStateDescriptor[V]) -> None:
        self._backend = backend
        self._name = descriptor.name

    def _list(self) -> list[V] | None:
        found = self._backend.get(self._name)
        return None if found is _MISSING else found

    def get(self) -> list[V]:
        return list(self._list() or ())

    def add(self, value: V) -> None:
        current = self._list()
        if current is None:
            self._backend.put(self._name, [value])
        else:
            current.append(value)

    def add_all(self, values: Iterable[V]) -> None:
        for value in values:
            self.add(value)

    def update(self, values: Iterable[V]) -> None:
        values = list(values)
        if values:
            self._backend.put(self._name, values)
        else:
            self._backend.remove(self._name)

    def clear(self) -> None:
        self._backend.remove(self._name)


class MapState(Generic[K, V]):
    """A map for the current key."""

    def __init__(self, backend: KeyedStateBackend, descriptor: MapStateDescriptor[K, V]) -> None:
        self._backend = backend
        self._name = descriptor.name

    def _map(self) -> dict[K, V]:
        found = self._backend.get(self._name)
        return {} if found is _MISSING else found

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._map().get(key, default)

    def put(self, key: K, value: V) -> None:
        found = self._backend.get(self._name)
        if found is _MISSING:
            self._backend.put(self._name, {key: value})
        else:
            found[key] = value

    def contains(self, key: K) -> bool:
        return key in self._map()

    def remove(self, key: K) -> None:
        found = self._backend.get(self._name)
        if found is not _MISSING:
            found.pop(key, None)
            if not found:
                self._backend.remove(self._name)

    def items(self) -> list[tuple[K, V]]:
        return list(self._map().items())

    def keys(self) -> list[K]:
        return list(self._map())

    def values(self) -> list[V]:
        return list(self._map().values())

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self._backend.remove(self._name)
