"""The restore plan: for each operator and each new subtask, the state handles it reads.

The pipeline turns subtask ``i`` of an operator into Spark partition ``i``; the service
sends the plan over HTTP as JSON (``to_dict``/``from_dict``, ``to_json``/``from_json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sparkpoint.checkpoint import (
    CheckpointKind,
    InvalidCheckpointValue,
    KeyedStateHandle,
    KeyGroupRange,
    OperatorStateHandle,
    serde,
)

#: Version of the plan's JSON shape; bumped on any incompatible change.
PLAN_FORMAT = 1


@dataclass(frozen=True, slots=True)
class SubtaskRestore:
    """What new subtask ``index`` of one operator restores.

    ``keyed`` handles are already cut to ``key_group_range``: each keeps only the offsets
    of the key groups this subtask owns, so a reader seeks straight to them.
    ``operator`` handles list, per state name, only the elements this subtask gets.
    """

    index: int
    key_group_range: KeyGroupRange
    keyed: tuple[KeyedStateHandle, ...] = ()
    operator: tuple[OperatorStateHandle, ...] = ()

    @property
    def has_state(self) -> bool:
        return bool(self.keyed or self.operator)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "key_groups": serde.range_to_list(self.key_group_range),
            "keyed": [serde.keyed_to_dict(h) for h in self.keyed],
            "operator": [serde.operator_to_dict(h) for h in self.operator],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SubtaskRestore:
        return cls(
            index=int(data["index"]),
            key_group_range=serde.range_from_list(data["key_groups"]),
            keyed=tuple(serde.keyed_from_dict(h) for h in data.get("keyed", ())),
            operator=tuple(serde.operator_from_dict(h) for h in data.get("operator", ())),
        )


@dataclass(frozen=True, slots=True)
class OperatorRestore:
    """The new subtasks of one operator. ``old_parallelism`` is ``None`` when the
    checkpoint holds nothing for the operator (it starts empty)."""

    operator_uid: str
    parallelism: int
    max_parallelism: int
    old_parallelism: int | None
    subtasks: tuple[SubtaskRestore, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "subtasks", tuple(self.subtasks))
        if [s.index for s in self.subtasks] != list(range(self.parallelism)):
            raise InvalidCheckpointValue(
                f"operator {self.operator_uid}: restore plan must list subtasks "
                f"0..{self.parallelism - 1} in order"
            )

    @property
    def has_state(self) -> bool:
        return any(s.has_state for s in self.subtasks)

    @property
    def rescaled(self) -> bool:
        return self.old_parallelism is not None and self.old_parallelism != self.parallelism

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.operator_uid,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "old_parallelism": self.old_parallelism,
            "subtasks": [s.to_dict() for s in self.subtasks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OperatorRestore:
        old = data.get("old_parallelism")
        return cls(
            operator_uid=str(data["uid"]),
            parallelism=int(data["parallelism"]),
            max_parallelism=int(data["max_parallelism"]),
            old_parallelism=None if old is None else int(old),
            subtasks=tuple(SubtaskRestore.from_dict(s) for s in data["subtasks"]),
        )


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """Where every new subtask of ``job_id`` finds its state in checkpoint ``checkpoint_id``.

    >>> plan.subtask("count", 3).keyed  # doctest: +SKIP
    (KeyGroupsStateHandle(key_group_range=KeyGroupRange(start=96, end=127), ...),)
    """

    job_id: str
    checkpoint_id: int
    checkpoint_kind: CheckpointKind
    operators: Mapping[str, OperatorRestore]
    #: Operators of the checkpoint that are not in the new graph; their state is dropped.
    non_restored: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "operators", MappingProxyType(dict(self.operators)))
        object.__setattr__(self, "non_restored", tuple(self.non_restored))

    def __reduce__(self) -> tuple[object, ...]:
        # mappingproxy does not pickle; the pipeline ships plan parts to executors.
        return (
            RestorePlan,
            (
                self.job_id,
                self.checkpoint_id,
                self.checkpoint_kind,
                dict(self.operators),
                self.non_restored,
            ),
        )

    def subtask(self, operator_uid: str, index: int) -> SubtaskRestore:
        return self.operators[operator_uid].subtasks[index]

    def __iter__(self) -> Iterator[OperatorRestore]:
        return iter(self.operators.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RestorePlan):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.job_id, self.checkpoint_id))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id,
            "checkpoint_kind": self.checkpoint_kind.value,
            "non_restored": list(self.non_restored),
            "operators": [op.to_dict() for op in self.operators.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestorePlan:
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            fmt = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise InvalidCheckpointValue(f"unknown restore plan format {fmt!r}")
        try:
            operators = [OperatorRestore.from_dict(op) for op in data["operators"]]
            return cls(
                job_id=str(data["job_id"]),
                checkpoint_id=int(data["checkpoint_id"]),
                checkpoint_kind=CheckpointKind(data["checkpoint_kind"]),
                operators={op.operator_uid: op for op in operators},
                non_restored=tuple(str(u) for u in data.get("non_restored", ())),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, InvalidCheckpointValue):
                raise
            raise InvalidCheckpointValue(f"malformed restore plan: {exc!r}") from exc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> RestorePlan:
        try:
            data = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidCheckpointValue(f"restore plan is not JSON: {exc}") from exc
        return cls.from_dict(data)
