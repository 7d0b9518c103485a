"""Keyed state as Spark DataFrames: read one operator's state out of any checkpoint or
savepoint, and bootstrap a savepoint from a DataFrame that a pipeline starts from — what
Flink's State Processor API and Spark's state data source give (docs/pipeline.md,
"Reading and bootstrapping state").

The DataFrame has three string columns: ``key`` and ``value`` as JSON text (tuples as
arrays; what JSON cannot hold as the JSON string of its ``repr``) and ``state``, the
state's name. Reading runs one Spark task per old subtask, each reading only its own
files; writing runs one task per new subtask, each writing its own key-group stream.

>>> df = read_keyed_state(spark, "/ckpt/clicks/chk-42", "process")  # doctest: +SKIP
>>> df.filter("state = 'totals'").show()                             # doctest: +SKIP
>>> write_savepoint(df, "/savepoints", uid="process", parallelism=4)  # doctest: +SKIP
'/savepoints/savepoint-bootst-5f3a9c01be72'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint import OperatorState, OperatorSubtaskState
from sparkpoint.pipeline.state_processor.entries import (
    SavepointTarget,
    commit_savepoint,
    decode_entries,
    group_states,
    key_from_json,
    load_operator,
    new_savepoint,
    subtask_entries,
    to_json,
    write_subtask,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The columns of a keyed-state DataFrame, all strings.
COLUMNS = ("key", "state", "value")
SCHEMA = "key string, state string, value string"


@dataclass(frozen=True, slots=True)
class _ReadSubtask:
    operator: OperatorState

    def __call__(self, index: int, _: Iterable[Any]) -> Iterator[tuple[str, str, str]]:
        raw = subtask_entries(self.operator, index)
        for entry in decode_entries(raw, self.operator.operator_uid):
            yield to_json(entry.key), entry.state, to_json(entry.value)


def read_keyed_state(
    spark: SparkSession, pointer: str, uid: str | None = None, **fs_options: Any
) -> DataFrame:
    """Operator ``uid``'s keyed state at ``pointer`` (a ``chk-<id>`` or savepoint
    directory, a `_metadata` file, or a job's checkpoint directory: its newest) as a
    DataFrame ``key, state, value``; ``uid`` None: the one operator with keyed state.

    The `_metadata` is read here (errors at once: ``CheckpointLoadError``,
    ``UnknownOperatorError``); the state files when the DataFrame is computed."""
    _, operator = load_operator(pointer, uid, **fs_options)
    sc = spark.sparkContext
    rows = sc.parallelize(range(operator.parallelism), operator.parallelism).mapPartitionsWithIndex(
        _ReadSubtask(operator)
    )
    return spark.createDataFrame(rows, SCHEMA)


def _decode(json_columns: Sequence[str]) -> Any:
    key_json, value_json = "key" in json_columns, "value" in json_columns

    def decode(row: Any) -> tuple[Any, tuple[str, Any]]:
        key = key_from_json(row[0]) if key_json else _as_key(row[0])
        value = json.loads(row[2]) if value_json else _plain(row[2])
        return key, (row[1], value)

    return decode


def _as_key(value: Any) -> Any:
    plain = _plain(value)
    if isinstance(plain, list):
        return tuple(_as_key(v) for v in plain)
    return plain


def _plain(value: Any) -> Any:
    """A Spark Row (a struct) as a dict, arrays as lists."""
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    return list(value) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True, slots=True)
class _WriteSubtask:
    target: SavepointTarget

    def __call__(
        self, index: int, items: Iterable[tuple[Any, tuple[str, Any]]]
    ) -> Iterator[tuple[int, OperatorSubtaskState]]:
        from sparkpoint.pipeline.state.snapshots import attempt

        states = group_states((key, name, value) for key, (name, value) in items)
        yield index, write_subtask(self.target, index, states, attempt())


def write_savepoint(
    df: DataFrame,
    directory: str,
    *,
    uid: str,
    parallelism: int,
    max_parallelism: int | None = None,
    job_id: str = "bootstrap",
    json_columns: Sequence[str] = ("key", "value"),
    **fs_options: Any,
) -> str:
    """Write ``df`` (columns ``key, state, value``) as operator ``uid``'s keyed state into
    a new savepoint under ``directory``; return the savepoint's directory, which a
    pipeline restores from (``PipelineDriver(..., restore_from=...)``).

    ``max_parallelism`` must be the job's (default: Flink's default for
    ``parallelism``); the job may run at another parallelism, restores rescale.
    ``json_columns``: the columns holding JSON text, as :func:`read_keyed_state` gives
    them; a column not named is taken as Spark gives it (strings, numbers, arrays as
    lists — as tuples for keys —, structs as dicts). A state given twice for one key
    is refused."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"the DataFrame needs columns key, state, value; it lacks {', '.join(missing)} "
            f"(it has {', '.join(df.columns)})"
        )
    unknown = sorted(set(json_columns) - {"key", "value"})
    if unknown:
        raise ValueError(f"json_columns may name key and value, not {', '.join(unknown)}")
    target = new_savepoint(
        directory, uid=uid, parallelism=parallelism, max_parallelism=max_parallelism,
        job_id=job_id, **fs_options,
    )  # fmt: skip
    pairs = df.select(*COLUMNS).rdd.map(_decode(tuple(json_columns)))
    written = dict(
        pairs.partitionBy(parallelism, target.subtask_of)
        .mapPartitionsWithIndex(_WriteSubtask(target))
        .collect()
    )
    return commit_savepoint(target, written)


def write_parquet(pointer: str, uid: str | None, output: str, **fs_options: Any) -> int:
    """``sparkpoint state read --format parquet``: the state at ``pointer`` as Parquet
    files in the directory ``output`` (Spark's layout), read by a local Spark session;
    returns the number of rows."""
    from sparkpoint.pipeline.runtime.spark_session import spark_session

    spark = spark_session("local[2]", "sparkpoint-state-read")
    df = read_keyed_state(spark, pointer, uid, **fs_options).cache()
    df.write.mode("errorifexists").parquet(output)
    return df.count()


def savepoint_from_parquet(path: str, directory: str, **options: Any) -> tuple[str, int]:
    """``sparkpoint state write --format parquet``: the rows ``key, state, value`` of the
    Parquet files at ``path`` (as ``write_parquet`` writes them) as a new savepoint under
    ``directory`` (``options``: those of :func:`write_savepoint`), by a local Spark
    session; returns the savepoint's directory and the number of rows."""
    from pyspark.errors import AnalysisException

    from sparkpoint.pipeline.runtime.spark_session import spark_session

    spark = spark_session("local[2]", "sparkpoint-state-write")
    try:
        df = spark.read.parquet(path).cache()
    except AnalysisException as exc:
        raise ValueError(f"cannot read Parquet files at {path}: {exc}") from exc
    return write_savepoint(df, directory, **options), df.count()
