"""Operator (non-keyed) list state of one subtask, with Flink's three redistribution modes.

SPLIT_DISTRIBUTE: on restore the elements of all old subtasks are split across the new
ones (source offsets). UNION: every new subtask gets all elements. BROADCAST: every new
subtask gets one full copy (all subtasks held the same list).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sparkpoint.checkpoint import DistributionMode
from sparkpoint.pipeline.state import pickles

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class OperatorListStateDescriptor(Generic[V]):
    name: str
    mode: DistributionMode = DistributionMode.SPLIT_DISTRIBUTE


class OperatorListState(Generic[V]):
    """A list of picklable elements; ``get()`` returns a copy, ``update`` replaces it."""

    def __init__(self, elements: list[V] | None = None) -> None:
        self._elements: list[V] = list(elements or ())

    def get(self) -> list[V]:
        return list(self._elements)

    def add(self, value: V) -> None:
        self._elements.append(value)

    def update(self, values: Iterable[V]) -> None:
        self._elements = list(values)

    def clear(self) -> None:
        self._elements = []


class OperatorStateStore:
    """Every operator list state of one subtask: name → (mode, list)."""

    def __init__(
        self, restored: dict[str, tuple[DistributionMode, list[Any]]] | None = None
    ) -> None:
        self._restored = dict(restored or {})
        self._states: dict[str, tuple[DistributionMode, OperatorListState[Any]]] = {}

    @property
    def is_restored(self) -> bool:
        return bool(self._restored)

    def get_list_state(self, descriptor: OperatorListStateDescriptor[V]) -> OperatorListState[V]:
        known = self._states.get(descriptor.name)
        if known is not None:
            if known[0] is not descriptor.mode:
                raise ValueError(f"operator state {descriptor.name!r} is {known[0]}")
            return known[1]
        _, elements = self._restored.get(descriptor.name, (descriptor.mode, []))
        state: OperatorListState[V] = OperatorListState(elements)
        self._states[descriptor.name] = (descriptor.mode, state)
        return state

    def snapshot(self) -> dict[str, tuple[DistributionMode, list[Any]]]:
        """The lists as they are now; names restored but not asked for again are kept, so
        state survives an epoch whose function did not touch it."""
        out = {n: (m, list(e)) for n, (m, e) in self._restored.items()}
        out.update({n: (m, s.get()) for n, (m, s) in self._states.items()})
        return out


def encode_element(value: Any) -> bytes:
    return pickles.dumps(value)


def decode_element(data: bytes) -> Any:
    return pickles.loads(data)
