"""A lookup join: each record of a keyed stream joined with the rows of a table that
have its key — a Spark DataFrame, a Parquet path, or a function of the SparkSession that
makes one (docs/pipeline.md, "Lookup join") — so a pipeline keeps its Spark tables as
they are. Flink SQL's lookup join, Structured Streaming's stream-static join.

The table is read on the driver, whole (``collect``), when an epoch's keyed stage is
shipped to the executors — before any record of the epoch is processed — and again at
the first epoch after ``refresh_ms`` has passed (never, without it: once per driver
run). Every record of an epoch sees the table as of that read, on every subtask, and
so does a retried task (it gets the same shipped copy). The table is not state: a
restored or replayed epoch reads it as it is then. Keep it small enough to collect.

>>> rates = LookupTable("/data/rates.parquet", key="currency", refresh_ms=60_000)  # doctest: +SKIP
>>> priced = (orders.key_by(lambda o: o["currency"])                  # doctest: +SKIP
...           .lookup_join(rates).left_outer().process(Priced(), uid="priced"))
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.functions import Context, KeyedProcessFunction, RuntimeContext
from sparkpoint.pipeline.api.joins import JoinContext, ProcessJoinFunction, join_pair
from sparkpoint.statefiles.keys import Key

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline


class LookupTable:
    """``table``: a DataFrame (collected again at each refresh: for files that change,
    give a path or a function), a Parquet path (read anew at each refresh), or a
    function ``spark -> DataFrame``. ``key``: the column (or columns: a tuple key) that
    holds the stream's key; a key may have several rows."""

    def __init__(
        self,
        table: Any,
        *,
        key: str | Sequence[str],
        refresh_ms: int | None = None,
    ) -> None:
        if not (isinstance(table, str) or callable(table) or hasattr(table, "collect")):
            raise TypeError(
                "LookupTable takes a DataFrame, a Parquet path or a function "
                f"spark -> DataFrame, got {type(table).__name__}"
            )
        names = [key] if isinstance(key, str) else key if isinstance(key, list | tuple) else []
        if not names or not all(isinstance(k, str) and k for k in names):
            raise TypeError(f"LookupTable: key must be a column name or names, got {key!r}")
        if refresh_ms is not None and (
            isinstance(refresh_ms, bool) or not isinstance(refresh_ms, int) or refresh_ms <= 0
        ):
            raise ValueError(f"LookupTable: refresh_ms must be a positive int, got {refresh_ms!r}")
        self._table = table
        self.key = key if isinstance(key, str) else tuple(key)
        self.refresh_ms = refresh_ms
        self._rows: dict[Key, list[dict[str, Any]]] | None = None
        self._read_at_ms = 0
        #: How many times the driver read the table (a copy shipped to tasks keeps it).
        self.reads = 0

    def rows_of(self, key: Key) -> list[dict[str, Any]]:
        """The rows with ``key`` in the copy this task was shipped (each a dict)."""
        if self._rows is None:
            self._read()  # in the driver, before any epoch shipped it (a test, say)
        assert self._rows is not None
        return self._rows.get(key, [])

    def _due(self) -> bool:
        if self._rows is None:
            return True
        if self.refresh_ms is None:
            return False
        return time.monotonic_ns() // 1_000_000 - self._read_at_ms >= self.refresh_ms

    def _read(self) -> None:
        if self._table is None:
            raise RuntimeError("a LookupTable shipped to a task has no table to read")
        rows: dict[Key, list[dict[str, Any]]] = {}
        for row in self._dataframe().collect():
            values = row.asDict(recursive=True)
            missing = [k for k in self._key_columns if k not in values]
            if missing:
                raise ValueError(
                    f"LookupTable: key column(s) {missing} not in the table's columns "
                    f"{sorted(values)}"
                )
            rows.setdefault(self._key_of(values), []).append(values)
        self._rows = rows
        self._read_at_ms = time.monotonic_ns() // 1_000_000
        self.reads += 1

    @property
    def _key_columns(self) -> tuple[str, ...]:
        return (self.key,) if isinstance(self.key, str) else self.key

    def _key_of(self, values: dict[str, Any]) -> Key:
        if isinstance(self.key, str):
            return values[self.key]
        return tuple(values[k] for k in self.key)

    def _dataframe(self) -> Any:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        if hasattr(self._table, "collect"):
            return self._table
        spark = SparkSession.getActiveSession()
        if spark is None:
            if SparkContext._active_spark_context is None:  # never start a Spark of our own
                raise RuntimeError(
                    "a LookupTable reads its table on the driver, in the process of the "
                    "pipeline's SparkSession, and this process has none"
                )
            spark = SparkSession.builder.getOrCreate()  # the driver's, from another thread
        if isinstance(self._table, str):
            return spark.read.parquet(self._table)
        return self._table(spark)

    def __getstate__(self) -> dict[str, Any]:
        """What a task is shipped: the rows as of now (read again first when due, on
        the driver), never the DataFrame or the function."""
        if self._table is not None and self._due():
            self._read()
        return {
            "_table": None,
            "key": self.key,
            "refresh_ms": self.refresh_ms,
            "_rows": self._rows,
            "_read_at_ms": self._read_at_ms,
            "reads": self.reads,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class LookupJoinOperator(KeyedProcessFunction):
    """The keyed function a lookup join runs as: no state of its own (the function's
    ``open`` may declare some); each record is handed over with each row of its key,
    or (left outer) once with ``None`` when its key has none."""

    def __init__(self, function: ProcessJoinFunction, table: LookupTable, outer: bool) -> None:
        self.function, self.table, self.outer = function, table, outer

    def open(self, ctx: RuntimeContext) -> None:
        self.join_ctx = JoinContext()
        self.function.open(ctx)

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        left = (value, ctx.timestamp)
        rows = self.table.rows_of(key)
        for row in rows:
            join_pair(self.function, self.join_ctx, ctx, key, left, (row, None))
        if not rows and self.outer:
            join_pair(self.function, self.join_ctx, ctx, key, left, None)


@dataclass(frozen=True)
class LookupJoin:
    """``keyed.lookup_join(LookupTable(…))``: inner unless ``left_outer()``; ``process``
    ends it."""

    keyed: Pipeline
    table: LookupTable
    outer: bool = False

    def left_outer(self) -> LookupJoin:
        """A record whose key has no row is handed over once, with ``right=None``."""
        return replace(self, outer=True)

    def process(self, function: ProcessJoinFunction, *, uid: str | None = None) -> Pipeline:
        """The join, as the keyed stage ``uid`` (default ``lookup-join``)."""
        if not isinstance(function, ProcessJoinFunction):
            raise TypeError(
                f"pipeline {self.keyed.job_id}: a lookup join takes a ProcessJoinFunction, "
                f"got {type(function).__name__}"
            )
        operator = LookupJoinOperator(function, self.table, self.outer)
        return self.keyed.process(operator, uid=uid or "lookup-join")


def lookup_join(keyed: Pipeline, table: LookupTable) -> LookupJoin:
    """Checks that ``keyed`` is a keyed stream of one input waiting for its function."""
    job = keyed.job_id
    if not isinstance(table, LookupTable):
        raise TypeError(
            f"pipeline {job}: lookup_join takes a LookupTable(table, key=…), "
            f"got {type(table).__name__}"
        )
    if not keyed._awaiting_process:
        raise ValueError(f"pipeline {job}: lookup_join needs a key_by before it")
    if keyed.second_key_selector is not None and not keyed.more_keyed:
        raise ValueError(
            f"pipeline {job}: lookup_join on two connected streams; join them first, "
            "then key_by the result and lookup_join it"
        )
    return LookupJoin(keyed, table)
