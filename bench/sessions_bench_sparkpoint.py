"""The sparkpoint side of bench/sessions_bench.py: the sessionization example
(``sparkpoint.examples.sessions``: ``EventTimeSessionWindows`` with an
``AggregateFunction``, a bounded-out-of-orderness watermark, a transactional file sink)
on the click generator, run to the end of its input by a ``PipelineDriver`` with the
embedded coordinator, on ``local[2]``."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sessions_bench_common import (
    OUT_OF_ORDERNESS_MS,
    PARALLELISM,
    Session,
    Workload,
    json_lines,
)


def run(workload: Workload, work: Path, interval_ms: int, backend: str) -> dict[str, Any]:
    import pyspark

    from sparkpoint.examples.sessions import sessions_pipeline
    from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
    from sparkpoint.pipeline.runtime.spark_session import spark_session

    spark = spark_session(
        "local[2]",
        "sessions-bench-sparkpoint",
        state_in_place=backend == "rocksdb",
        **{"spark.driver.memory": "2g", "spark.local.dir": str(work / "local")},
    )
    pipeline = sessions_pipeline(
        "sessions",
        workload.source(),
        str(work / "out"),
        str(work / "late"),
        parallelism=PARALLELISM,
        gap_ms=workload.gap_ms,
        out_of_order_ms=OUT_OF_ORDERNESS_MS,
    ).with_state_backend(backend)
    channel = EmbeddedChannel(str(work / "ckpt"), interval_ms=interval_ms)
    driver = PipelineDriver(pipeline, spark, channel)
    driver.start()
    marks: list[tuple[int, float]] = []  # (epochs run, when): each epoch's seconds

    def mark(d: Any) -> bool:
        marks.append((d.status.epoch, time.perf_counter()))
        return False

    started = time.perf_counter()
    driver.run(until=mark)  # to the end of input, and the epoch that fires every open session
    driver.finish()  # a last checkpoint: every session committed
    seconds = time.perf_counter() - started
    epoch_s = [round(b[1] - a[1], 3) for a, b in itertools.pairwise(marks) if b[0] > a[0]]
    status = driver.status
    driver.close()
    return {
        "seconds": seconds,
        "records": status.records,
        "epochs": status.epoch,
        "checkpoints": len(status.acknowledged),
        "epoch_s": epoch_s,
        "version": f"sparkpoint on PySpark {pyspark.__version__}, {backend} backend",
    }


def sessions(work: Path) -> Iterator[Session]:
    """What the transactional sink committed."""
    for row in json_lines(work / "out", "part-*.jsonl"):
        value = row["value"]
        yield Session(row["key"], row["start"], row["end"], value["clicks"], value["amount"])
