"""Stateless stages: ``map``, ``filter``, ``flat_map`` on each record and ``dataframe``
on each epoch's records as a Spark DataFrame, before ``key_by`` or after the keyed
function (docs/pipeline.md, "Stages").

They hold no state: a checkpoint has nothing of theirs, and a restore replays the
records they see. Spark may run them again (a retried or recomputed task), so they must
be deterministic, which keeps the output exactly-once. They are plain picklable objects
(no pyspark here); runtime/stage_plan.py runs them on Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

#: The kinds of per-record stages.
MAP, FILTER, FLAT_MAP = "map", "filter", "flat_map"


@dataclass(frozen=True, slots=True)
class RecordStage:
    """One per-record stage; ``name`` names it in errors."""

    kind: str
    fn: Callable[[Any], Any]
    name: str

    def __post_init__(self) -> None:
        if self.kind not in (MAP, FILTER, FLAT_MAP):
            raise ValueError(f"stage {self.name!r}: unknown kind {self.kind!r}")
        if not callable(self.fn):
            raise TypeError(f"stage {self.name!r}: {self.fn!r} is not callable")

    def apply(self, record: Any) -> Iterable[Any]:
        if self.kind == MAP:
            return (self.fn(record),)
        if self.kind == FILTER:
            return (record,) if self.fn(record) else ()
        out = self.fn(record)
        if out is None or isinstance(out, (str, bytes, dict)):
            raise TypeError(
                f"flat_map stage {self.name!r} returned {type(out).__name__}, "
                "not an iterable of records"
            )
        return out


@dataclass(frozen=True, slots=True)
class DataFrameStage:
    """``fn(DataFrame) -> DataFrame`` over one epoch's records, read into a DataFrame of
    ``schema`` (a pyspark StructType or a DDL string such as ``"user STRING, ts BIGINT"``).
    Records are dicts; fields of a record not in the schema are left out, a missing one is
    null. Rows come out as dicts."""

    fn: Callable[[Any], Any]
    schema: Any
    name: str

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"stage {self.name!r}: {self.fn!r} is not callable")
        if self.schema is None:
            raise ValueError(f"dataframe stage {self.name!r} needs a schema")


Stage = RecordStage | DataFrameStage


def run_record_stages(stages: tuple[RecordStage, ...], record: Any) -> Iterator[Any]:
    """``record`` through ``stages`` in order: the records the last one gives."""
    if not stages:
        yield record
        return
    first, rest = stages[0], stages[1:]
    for out in first.apply(record):
        yield from run_record_stages(rest, out)


def leading_record_stages(
    stages: tuple[Stage, ...],
) -> tuple[tuple[RecordStage, ...], tuple[Stage, ...]]:
    """The per-record stages before the first DataFrame stage, and the rest."""
    for n, stage in enumerate(stages):
        if isinstance(stage, DataFrameStage):
            return tuple(stages[:n]), stages[n:]  # type: ignore[return-value]
    return tuple(stages), ()  # type: ignore[return-value]


def stage_name(kind: str, fn: Callable[..., Any], name: str | None, position: int) -> str:
    """The name a stage has in errors: the one given, else its kind, place and function."""
    if name:
        return name
    qualname = getattr(fn, "__qualname__", type(fn).__name__)
    return f"{kind} #{position} ({qualname})"
