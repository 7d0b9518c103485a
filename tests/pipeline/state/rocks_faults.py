"""The clicks job on the on-disk state backend as a driver process, with its Python
workers killed inside chosen tasks (``python -m tests.pipeline.state.rocks_faults WORK``).

Two faults, each only in a task's first attempt:
- ``mid``: subtask 1 of epoch 3 kills its worker halfway through its records, before
  the epoch's write batch (the retry finds the store at the version the epoch began at);
- ``after``: subtask 2 of epoch 4 kills its worker while its outputs are pickled, after
  the write batch (the retry finds the store one step ahead and rolls it back).
Each fault leaves a marker file in WORK/faults first, so the test knows it fired.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from sparkpoint.examples.clicks import ClickTotals, clicks_pipeline
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.api.functions import Context, RuntimeContext
from sparkpoint.pipeline.runtime.spark_session import spark_session
from sparkpoint.pipeline.sources.generator import ClickEventSource

MID_EPOCH, AFTER_EPOCH = 3, 4


def source() -> ClickEventSource:
    return ClickEventSource(splits=4, users=300, records_per_epoch=400, records_per_split=1600)


def _attempt() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else context.attemptNumber()


def _die(markers: str, name: str) -> None:
    Path(markers, name).touch()
    os._exit(1)  # the Python worker dies like a killed process: no clean-up


class DieWhenPickled:
    """An output whose pickling kills the worker (after the epoch's write batch)."""

    def __init__(self, markers: str) -> None:
        self.markers = markers

    def __reduce__(self) -> Any:
        _die(self.markers, f"after-{AFTER_EPOCH}")
        return (str, ())


class FaultyClicks(ClickTotals):
    def __init__(self, markers: str) -> None:
        super().__init__()
        self.markers = markers

    def open(self, ctx: RuntimeContext) -> None:
        super().open(ctx)
        self._seen = 0

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        super().process_element(key, value, ctx)
        self._seen += 1
        first = _attempt() == 0
        if first and ctx.epoch == MID_EPOCH and ctx.subtask == 1 and self._seen == 40:
            _die(self.markers, f"mid-{MID_EPOCH}")
        if first and ctx.epoch == AFTER_EPOCH and ctx.subtask == 2 and self._seen == 1:
            ctx.collect(DieWhenPickled(self.markers))


def main(work: Path, master: str) -> None:
    markers = work / "faults"
    markers.mkdir(parents=True, exist_ok=True)
    spark = spark_session(
        master, "sparkpoint-rocks-faults", state_in_place=True, **{"spark.task.maxFailures": "4"}
    )
    clicks = clicks_pipeline("rocks-faults", source(), str(work / "out"), parallelism=4)
    # The clicks job with its keyed function swapped for the faulty one.
    p = replace(clicks, function=FaultyClicks(str(markers))).with_state_backend("rocksdb")
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(work / "ckpt"), interval_ms=3_600_000))
    driver.start()
    driver.run(max_epochs=2)
    driver.channel.trigger_checkpoint()
    driver.run()
    driver.finish()
    driver.close()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "local-cluster[2,1,1024]")
