"""Stages on Spark, inside an epoch's one job (api/stages.py says what they are).

Records flow as ``(order, record)`` pairs. The order is what the keyed function sorts an
epoch's records by, so it must come out the same when Spark recomputes a partition:
``(split, position)`` from the source, one more index per record a per-record stage
makes, and after a DataFrame stage ``(kept, order, row bytes)``. The DataFrame carries
the order in the column ``_sparkpoint_order``: a stage that keeps it (``withColumn``,
``select("*", ...)``, a join) keeps source order; one that drops it gives its rows in an
order fixed by their content. Either way the order is total, so a recomputed partition
gives the keyed function the same sequence.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.stages import (
    DataFrameStage,
    RecordStage,
    Stage,
    leading_record_stages,
    run_record_stages,
)

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql.types import StructType

#: The column a DataFrame stage's input carries each record's order in.
ORDER_COLUMN = "_sparkpoint_order"


@dataclass(frozen=True, slots=True)
class RecordStagesTask:
    """``(order, record)`` → ``((*order, n), out)`` for the n-th record ``stages`` make."""

    stages: tuple[RecordStage, ...]

    def __call__(self, items: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        for order, record in items:
            for n, out in enumerate(run_record_stages(self.stages, record)):
                yield (*order, n), out


@dataclass(frozen=True, slots=True)
class ToRow:
    """``(order, record)`` → the DataFrame row: the schema's fields of the record (a
    dict), then the pickled order."""

    stage: str
    names: tuple[str, ...]

    def __call__(self, item: tuple[Any, Any]) -> tuple[Any, ...]:
        order, record = item
        if not isinstance(record, dict):
            raise TypeError(
                f"dataframe stage {self.stage!r} takes records that are dicts, "
                f"got {type(record).__name__}: {record!r:.200}"
            )
        return (*(record.get(n) for n in self.names), pickle.dumps(order, protocol=5))


def from_row(row: Any) -> tuple[Any, dict[str, Any]]:
    """A DataFrame stage's output row → ``(order, record)`` (see the module docstring)."""
    record = row.asDict(recursive=True)
    order = record.pop(ORDER_COLUMN, None)
    content = pickle.dumps(record, protocol=5)
    if order is None:
        return (1, (), content), record
    return (0, pickle.loads(order), content), record


def schema_of(stage: DataFrameStage) -> StructType:
    from pyspark.sql.types import StructType

    if isinstance(stage.schema, StructType):
        schema = stage.schema
    elif isinstance(stage.schema, str):
        try:
            schema = StructType.fromDDL(stage.schema)
        except Exception as exc:  # Spark's parse error, reworded with the stage's name
            raise ValueError(
                f"dataframe stage {stage.name!r}: schema {stage.schema!r} does not parse: {exc}"
            ) from exc
    else:
        raise TypeError(
            f"dataframe stage {stage.name!r}: schema must be a StructType or a DDL string, "
            f"not {type(stage.schema).__name__}"
        )
    if ORDER_COLUMN in schema.fieldNames():
        raise ValueError(f"dataframe stage {stage.name!r}: {ORDER_COLUMN} is sparkpoint's column")
    return schema


def through_dataframe(ordered: RDD[Any], stage: DataFrameStage) -> RDD[Any]:
    """``ordered`` through the DataFrame stage: lazy, so still part of the epoch's job."""
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import BinaryType, StructField, StructType

    schema = schema_of(stage)
    with_order = StructType([*schema.fields, StructField(ORDER_COLUMN, BinaryType(), False)])
    spark = SparkSession.builder.getOrCreate()  # the session the driver runs on
    frame = spark.createDataFrame(
        ordered.map(ToRow(stage.name, tuple(schema.fieldNames()))), with_order
    )
    out = stage.fn(frame)
    if not isinstance(out, DataFrame):
        raise TypeError(
            f"dataframe stage {stage.name!r} returned {type(out).__name__}, not a DataFrame"
        )
    return out.rdd.map(from_row)


def run_stages(ordered: RDD[Any], stages: tuple[Stage, ...]) -> RDD[Any]:
    """``(order, record)`` pairs through ``stages`` in order."""
    rest = stages
    while rest:
        leading, rest = leading_record_stages(rest)
        if leading:
            ordered = ordered.mapPartitions(RecordStagesTask(leading))
        if rest:
            assert isinstance(rest[0], DataFrameStage)
            ordered, rest = through_dataframe(ordered, rest[0]), rest[1:]
    return ordered
