"""One run of a query: the pipeline on Spark, with a coordinator embedded in the driver,
from the first event to a last checkpoint that commits every output row."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.examples.nexmark.queries import query_pipeline
from sparkpoint.pipeline import DriverStatus, EmbeddedChannel, PipelineDriver


@dataclass(frozen=True)
class Run:
    query: str
    parallelism: int
    epochs: int
    #: The records the first keyed stage took in (bids; a join: both inputs' records).
    records: int
    #: From the driver's start (restore included) to the last checkpoint's completion.
    seconds: float
    last_checkpoint: int


def run_query(
    name: str,
    events_dir: str,
    out: str,
    spark: Any,
    checkpoint_dir: str,
    *,
    parallelism: int = 4,
    bytes_per_epoch: int = 4 << 20,
    interval_ms: int = 1_000,
    state_backend: str | None = None,
    on_epoch: Callable[[DriverStatus], None] | None = None,
) -> Run:
    """Run query ``name`` over the event files under ``events_dir`` to their end; its
    rows are committed under ``out``. A run whose ``checkpoint_dir`` holds checkpoints
    goes on from the newest (a driver killed before is started again so)."""
    pipeline = query_pipeline(
        name, events_dir, out,
        parallelism=parallelism, bytes_per_epoch=bytes_per_epoch, state_backend=state_backend,
    )  # fmt: skip
    channel = EmbeddedChannel(checkpoint_dir, interval_ms=interval_ms)
    driver = PipelineDriver(pipeline, spark, channel, on_epoch=on_epoch)
    started = time.monotonic()
    try:
        driver.start()
        driver.run()
        last = driver.finish()
    finally:
        driver.close()
    status = driver.status
    return Run(name, parallelism, status.epoch, status.records, time.monotonic() - started, last)
