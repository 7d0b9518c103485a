"""The Structured Streaming side of bench/sessions_bench.py: the same sessions as a Python
function of Spark 4's stateful operators, with an event-time watermark.

- ``ss``: ``applyInPandasWithState`` with ``GroupStateTimeout.EventTimeTimeout``: the open
  session in the group's state, its timeout at last click + gap.
- ``ss-tws``: ``transformWithStateInPandas`` (state API v2, RocksDB state store) with an
  event-time timer at last click + gap.

Input: the click generator as a Python streaming data source (each micro-batch reads
``per_epoch`` records, split by split, in Spark's Python workers: the generator code runs
where sparkpoint's runs). Spark has no end of input for a stream, so after the last click
the source gives one click of a marker user far in the future: it moves the watermark past
every session, whose timeouts fire in the next (no-data) micro-batch. The function skips
the marker. The query ends when a micro-batch ran with that watermark.

Both functions close a session when a user's next click comes more than the gap after the
previous one: a user's clicks reach them in event-time order (one generator split each),
so no two open sessions ever need merging, which Flink's and sparkpoint's session windows
would do.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from sessions_bench_common import (
    FLUSH_TS_MS,
    FLUSH_USER,
    OUT_OF_ORDERNESS_MS,
    PARALLELISM,
    SPLITS,
    Session,
    Workload,
    flat_sessions,
)

CLICK_SCHEMA = "user string, ts long, page string, amount long"
OUTPUT_SCHEMA = "user string, start long, end long, clicks long, amount long"
STATE_SCHEMA = "start long, last long, clicks long, amount long"
ENGINE_CAP_S = 1800.0  # a query that never reaches the marker's watermark fails the run


def _data_source(workload: Workload) -> type:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    class Clicks(InputPartition):
        def __init__(self, split: int, start: int, end: int) -> None:
            self.split, self.start, self.end = split, start, end

    class ClickReader(DataSourceStreamReader):
        """Offsets: the next index of every split, and whether the marker was given."""

        def initialOffset(self) -> dict:
            return {**{f"gen-{s}": 0 for s in range(SPLITS)}, "flush": 0}

        def getDefaultReadLimit(self) -> Any:
            return ReadMaxRows(workload.per_epoch)

        def latestOffset(self, start: dict, limit: Any) -> dict:
            step = (
                workload.per_split
                if isinstance(limit, ReadAllAvailable)
                else max(1, limit.max_rows // SPLITS)
            )
            ahead = {
                f"gen-{s}": min(start[f"gen-{s}"] + step, workload.per_split) for s in range(SPLITS)
            }
            if ahead != {k: v for k, v in start.items() if k != "flush"}:
                return {**ahead, "flush": 0}
            return {**ahead, "flush": 1}  # every click read: the marker (once)

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            parts: list[InputPartition] = [
                Clicks(s, start[f"gen-{s}"], end[f"gen-{s}"])
                for s in range(SPLITS)
                if end[f"gen-{s}"] > start[f"gen-{s}"]
            ]
            if end["flush"] > start["flush"]:
                parts.append(Clicks(-1, 0, 1))
            return parts

        def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
            if partition.split < 0:
                yield (FLUSH_USER, FLUSH_TS_MS, "", 0)
                return
            reader = workload.reader()
            for index in range(partition.start, partition.end):
                click = reader.event(partition.split, index)
                yield (click["user"], click["ts"], click["page"], click["amount"])

    class ClickSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "sessions_bench_clicks"

        def schema(self) -> str:
            return CLICK_SCHEMA

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return ClickReader()

    return ClickSource


def _sessions(frames: Iterator[Any], gap: int, open_: tuple[int, ...] | None) -> tuple[Any, Any]:
    """Fold a user's new clicks into its open session; the sessions that closed (as
    output rows) and the one still open."""
    import pandas as pd

    clicks = pd.concat(list(frames)).sort_values("ts")
    closed = []
    start, last, count, amount = open_ if open_ is not None else (-1, -1, 0, 0)
    for ts, spent in zip(clicks["ts"].tolist(), clicks["amount"].tolist(), strict=True):
        if count and ts - last > gap:
            closed.append((start, last + gap, count, amount))
            count = 0
        if not count:
            start, amount = ts, 0
        last, count, amount = ts, count + 1, amount + spent
    return closed, (start, last, count, amount)


def _frame(user: str, closed: list[tuple[int, ...]]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [(user, *row) for row in closed], columns=["user", "start", "end", "clicks", "amount"]
    )


def _with_group_state(gap: int, key: tuple[str], frames: Iterator[Any], state: Any) -> Any:
    """``applyInPandasWithState``: the open session is the group's state."""
    (user,) = key
    if user == FLUSH_USER:
        return
    if state.hasTimedOut:
        start, last, count, amount = state.get
        state.remove()
        yield _frame(user, [(start, last + gap, count, amount)])
        return
    closed, open_ = _sessions(frames, gap, state.get if state.exists else None)
    state.update(open_)
    state.setTimeoutTimestamp(open_[1] + gap)
    if closed:
        yield _frame(user, closed)


def _processor(gap: int) -> Any:
    from pyspark.sql.streaming import StatefulProcessor

    class Sessionize(StatefulProcessor):
        """``transformWithStateInPandas``: the open session in a value state, an
        event-time timer at its end."""

        def init(self, handle: Any) -> None:
            self.handle = handle
            self.session = handle.getValueState("session", STATE_SCHEMA)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            (user,) = key
            if user == FLUSH_USER:
                return
            previous = self.session.get() if self.session.exists() else None
            closed, open_ = _sessions(rows, gap, previous)
            if previous is not None:
                self.handle.deleteTimer(previous[1] + gap)
            self.session.update(open_)
            self.handle.registerTimer(open_[1] + gap)
            if closed:
                yield _frame(user, closed)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            (user,) = key
            start, last, count, amount = self.session.get()
            self.session.clear()
            yield _frame(user, [(start, last + gap, count, amount)])

        def close(self) -> None:
            pass

    return Sessionize()


def session(work: Path, system: str) -> Any:
    from sparkpoint.pipeline.runtime.spark_session import spark_session

    conf = {
        "spark.driver.memory": "2g",
        "spark.local.dir": str(work / "local"),
        "spark.sql.shuffle.partitions": str(PARALLELISM),
    }
    if system == "ss-tws":  # state API v2 runs on the RocksDB state store only
        conf["spark.sql.streaming.stateStore.providerClass"] = (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        )
    return spark_session("local[2]", f"sessions-bench-{system}", **conf)


def _start(spark: Any, system: str, workload: Workload, work: Path) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    spark.dataSource.register(_data_source(workload))
    clicks = (
        spark.readStream.format("sessions_bench_clicks")
        .load()
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", f"{OUT_OF_ORDERNESS_MS} milliseconds")
        .groupBy("user")
    )
    if system == "ss":
        sessions = clicks.applyInPandasWithState(
            partial(_with_group_state, workload.gap_ms),
            OUTPUT_SCHEMA,
            STATE_SCHEMA,
            "append",
            GroupStateTimeout.EventTimeTimeout,
        )
    else:
        sessions = clicks.transformWithStateInPandas(
            _processor(workload.gap_ms), OUTPUT_SCHEMA, "append", "EventTime"
        )
    return (
        sessions.writeStream.format("json")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "ckpt"))
        .outputMode("append")
        .trigger(processingTime="0 seconds")
        .start()
    )


def _watermark_ms(progress: dict[str, Any]) -> int:
    text = progress.get("eventTime", {}).get("watermark")
    return int(datetime.fromisoformat(text).timestamp() * 1000) if text else 0


def run(system: str, workload: Workload, work: Path) -> dict[str, Any]:
    spark = session(work, system)
    started = time.perf_counter()
    query = _start(spark, system, workload, work)
    done_at = FLUSH_TS_MS - OUT_OF_ORDERNESS_MS
    deadline = started + ENGINE_CAP_S
    while not any(_watermark_ms(p) >= done_at for p in query.recentProgress):
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        if time.perf_counter() > deadline:
            raise RuntimeError(f"no micro-batch at the end-of-input watermark in {ENGINE_CAP_S} s")
        time.sleep(0.05)  # polling the query's progress (a bench, not a test)
    seconds = time.perf_counter() - started
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    query.stop()
    return {
        "seconds": seconds,
        "batches": len(batches),
        "batch_s": [p["durationMs"]["triggerExecution"] / 1000 for p in batches],
        "version": spark.version,
    }


def sessions(work: Path) -> Iterator[Session]:
    """What the query's file sink committed."""
    return flat_sessions(work / "out", "part-*.json")
