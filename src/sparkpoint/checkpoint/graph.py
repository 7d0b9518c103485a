"""The job graph a pipeline registers: its operators, by stable uid, and their parallelism."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint.errors import InvalidCheckpointValue
from sparkpoint.checkpoint.ids import validate_job_id, validate_operator_uid
from sparkpoint.checkpoint.keygroups import check_parallelism


@dataclass(frozen=True, slots=True)
class OperatorSpec:
    """One operator of a job graph.

    ``acknowledges``: its subtasks acknowledge every checkpoint (sources, stateful
    functions and sinks do; a stateless map need not). ``keyed``: it holds keyed state, so
    its max parallelism is fixed for the life of its state.
    """

    uid: str
    parallelism: int
    max_parallelism: int
    name: str = ""
    keyed: bool = False
    acknowledges: bool = True

    def __post_init__(self) -> None:
        validate_operator_uid(self.uid)
        check_parallelism(self.parallelism, self.max_parallelism, self.uid)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "keyed": self.keyed,
            "acknowledges": self.acknowledges,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OperatorSpec:
        try:
            return cls(
                uid=str(data["uid"]),
                name=str(data.get("name", "")),
                parallelism=int(data["parallelism"]),
                max_parallelism=int(data["max_parallelism"]),
                keyed=bool(data.get("keyed", False)),
                acknowledges=bool(data.get("acknowledges", True)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidCheckpointValue):
                raise
            raise InvalidCheckpointValue(f"malformed operator spec: {exc!r}") from exc


@dataclass(frozen=True, slots=True)
class JobGraph:
    """The operators of a job, in topological order (sources first)."""

    job_id: str
    operators: tuple[OperatorSpec, ...]

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        object.__setattr__(self, "operators", tuple(self.operators))
        if not self.operators:
            raise InvalidCheckpointValue(f"job {self.job_id}: the graph has no operators")
        seen: set[str] = set()
        for op in self.operators:
            if op.uid in seen:
                raise InvalidCheckpointValue(f"job {self.job_id}: operator uid {op.uid!r} twice")
            seen.add(op.uid)

    def operator(self, uid: str) -> OperatorSpec:
        for op in self.operators:
            if op.uid == uid:
                return op
        raise KeyError(uid)

    @property
    def acknowledging_subtasks(self) -> frozenset[tuple[str, int]]:
        """Every (operator uid, subtask index) a checkpoint waits for."""
        return frozenset(
            (op.uid, i) for op in self.operators if op.acknowledges for i in range(op.parallelism)
        )

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "operators": [op.to_dict() for op in self.operators]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobGraph:
        if not isinstance(data, dict) or not isinstance(data.get("operators"), list):
            raise InvalidCheckpointValue("job graph must be an object with a list of operators")
        return cls(
            job_id=str(data.get("job_id", "")),
            operators=tuple(OperatorSpec.from_dict(op) for op in data["operators"]),
        )
