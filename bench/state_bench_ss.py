"""The Structured Streaming side of bench/state_bench.py: Spark 4's RocksDB state store with
changelog checkpointing, the same aggregate built in (``groupBy().agg``) or as a Python
function (``applyInPandasWithState``); a measured run, and a restore after its kill -9.

The state is filled by a first query with large micro-batches (key = row number modulo the
keys), stopped, then the timed query continues from the same checkpoint with micro-batches
of the timed size and keys drawn from all keys or the hot 1 % (a change of projection
before the aggregation, which Structured Streaming allows on restart). It checkpoints every
micro-batch, as it always does.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from state_bench_common import (
    PARALLELISM,
    PAYLOAD,
    RECORDS_PER_EPOCH,
    SPLITS,
    TIMED,
    du,
    hot_space,
)

FILL_ROWS = {"ss": 2_000_000, "ss-python": 500_000}
WARM_UP = 2  # a replayed fill batch, then the state store's reload at the timed size
PYTHON_FILL_CAP_S = 120.0  # the Python function fills ~2,000 keys/s: capped, and said so
PYTHON_TIMED_CAP_S = 180.0


def _session(name: str, memory: str, work: Path) -> Any:
    from sparkpoint.pipeline.runtime.spark_session import spark_session

    return spark_session(
        "local[2]",
        name,
        **{
            "spark.driver.memory": memory,
            "spark.local.dir": str(work / "local"),
            "spark.sql.shuffle.partitions": str(PARALLELISM),
            "spark.sql.streaming.stateStore.providerClass": (
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
            ),
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        },
    )


def _update(key: tuple[Any, ...], frames: Any, state: Any) -> Any:
    """The aggregate as a Python function: count, sum and the payload per key."""
    import pandas as pd

    count, amount = (state.get[0], state.get[1]) if state.exists else (0, 0)
    for frame in frames:
        count += len(frame)
        amount += int(frame["a"].sum())
    state.update((count, amount, f"{key[0]:0{PAYLOAD}d}"))
    yield pd.DataFrame({"k": [key[0]], "n": [count], "s": [amount]})


def _start(spark: Any, system: str, keys: int, space: int | None, rows: int, ckpt: Path) -> Any:
    """``space`` None: the fill (key = row number modulo ``keys``); else keys drawn by a
    hash of the row number from ``space`` keys."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    source = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", SPLITS)
        .load()
    )
    key = (
        F.pmod(F.col("value"), F.lit(keys))
        if space is None
        else F.pmod(F.xxhash64("value"), F.lit(space))
    )
    keyed = source.select(key.alias("k"), (F.col("value") % 65536).alias("a"))
    if system == "ss":
        out = keyed.groupBy("k").agg(
            F.count("*").alias("n"), F.sum("a").alias("s"), F.max(F.lpad("k", PAYLOAD, "0"))
        )
    else:
        out = keyed.groupBy("k").applyInPandasWithState(
            _update,
            "k long, n long, s long",
            "n long, s long, p string",
            "update",
            GroupStateTimeout.NoTimeout,
        )
    return (
        out.writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="0 seconds")
        .start()
    )


def _batches(query: Any) -> list[dict[str, Any]]:
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def _next_batch(query: Any, deadline: float) -> bool:
    done = len(query.recentProgress)
    while len(query.recentProgress) <= done:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # polling the query's progress (a bench, not a test)
    return True


def run(system: str, keys: int, hot: bool, work: Path, memory: str) -> dict[str, Any]:
    spark = _session(f"state-bench-{system}", memory, work)
    ckpt = work / "ss-ckpt"
    python = system == "ss-python"
    rows = min(FILL_ROWS[system], keys)
    started = time.monotonic()
    fill_deadline = started + (PYTHON_FILL_CAP_S if python else 1e9)
    query = _start(spark, system, keys, None, rows, ckpt)
    while sum(p["numInputRows"] for p in _batches(query)) < keys:
        if not _next_batch(query, fill_deadline):
            break
    filled = min(keys, sum(p["numInputRows"] for p in _batches(query)))
    query.stop()
    fill_s = time.monotonic() - started
    query = _start(spark, system, keys, hot_space(keys, hot), RECORDS_PER_EPOCH, ckpt)
    timed_deadline = time.monotonic() + (PYTHON_TIMED_CAP_S if python else 1e9)
    growth: list[int] = []
    while len(_batches(query)) < WARM_UP + TIMED:
        size = du(ckpt)
        if not _next_batch(query, timed_deadline):
            break
        growth.append(du(ckpt) - size)
    timed = _batches(query)[WARM_UP:]
    if not timed:  # the cap came first: the warm-up batches are all there is
        timed = _batches(query)[-1:]
    query.stop()
    seconds = [p["durationMs"]["triggerExecution"] / 1000 for p in timed]
    return {
        "fill_s": fill_s,
        "filled_keys": filled,
        "epoch_s": None,
        "epoch_checkpoint_s": statistics.median(seconds),
        "timed_batches": len(timed),
        "written_bytes": statistics.median(growth[-len(timed) :]),
        "state_bytes": du(ckpt / "state"),
    }


def restore(
    system: str, keys: int, hot: bool, work: Path, memory: str, since: float
) -> dict[str, Any]:
    """The query started again after the measured run's kill -9: seconds from this
    process's launch (``since``) to its first micro-batch with rows completed."""
    spark = _session(f"state-bench-{system}", memory, work)
    session_up = time.time()
    query = _start(spark, system, keys, hot_space(keys, hot), RECORDS_PER_EPOCH, work / "ss-ckpt")
    while not _batches(query):
        _next_batch(query, time.monotonic() + 3600)
    done = time.time()
    query.stop()
    return {
        "restore_s": done - since,
        "restore_parts_s": {"session": session_up - since, "first_batch": done - session_up},
    }
