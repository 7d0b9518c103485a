"""The sparkpoint side of bench/state_bench.py: the keyed running aggregate on the
in-memory or the RocksDB backend; a measured run, and a restore after its kill -9."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from state_bench_common import (
    FILL_RECORDS,
    INCREMENTAL_CHECKPOINTS,
    PARALLELISM,
    PAYLOAD,
    RECORDS_PER_EPOCH,
    SPLITS,
    TIMED,
    du,
    hot_space,
)

MANUAL = 3_600_000  # checkpoints only when the bench triggers one


@dataclass(frozen=True, slots=True)
class KeyReader:
    """Record ``i`` of split ``s`` is global record ``g = i·splits + s``: the first
    ``keys`` records fill the state (key g), the rest draw a key from all keys or from
    the hot 1 %."""

    keys: int
    hot: bool

    def read(self, split: Any) -> Any:
        from sparkpoint.pipeline.sources.generator import _mix

        number = int(split.split.rsplit("-", 1)[1])
        space = hot_space(self.keys, self.hot)
        for i in range(split.start, split.end):
            g = i * SPLITS + number
            x = _mix(g)
            yield i, (g if g < self.keys else x % space, x & 0xFFFF)


def _source(keys: int, hot: bool) -> Any:
    from sparkpoint.pipeline.sources.base import EpochRange
    from sparkpoint.pipeline.sources.generator import ClickEventSource

    class KeySource(ClickEventSource):
        """The generator's offsets and restore; epochs as large as ``epoch_records``
        (set between epochs: large while filling, then the timed size)."""

        def __init__(self) -> None:
            super().__init__(splits=SPLITS, records_per_epoch=RECORDS_PER_EPOCH)
            self._reader = KeyReader(keys, hot)  # type: ignore[assignment]
            self.epoch_records = RECORDS_PER_EPOCH

        def plan_epoch(self) -> list[EpochRange]:
            per_split = self.epoch_records // SPLITS
            return [EpochRange(s, o, o + per_split) for s, o in self.offsets().items()]

    return KeySource()


def _aggregate() -> Any:
    from sparkpoint.pipeline.api.functions import KeyedProcessFunction
    from sparkpoint.pipeline.api.keyed_state import ValueStateDescriptor

    class RunningAggregate(KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            self.total = ctx.get_state(ValueStateDescriptor("total"))

        def process_element(self, key: Any, value: Any, ctx: Any) -> None:
            found = self.total.value()
            count, amount = (0, 0) if found is None else found[:2]
            self.total.update((count + 1, amount + value[1], f"{key:0{PAYLOAD}d}"))

    return RunningAggregate()


def _driver(backend: str, keys: int, hot: bool, work: Path, memory: str) -> tuple[Any, ...]:
    from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
    from sparkpoint.pipeline.api.builder import Pipeline
    from sparkpoint.pipeline.runtime.spark_session import spark_session
    from sparkpoint.pipeline.sinks.files import TransactionalFileSink

    spark = spark_session(
        "local[2]",
        "state-bench",
        state_in_place=backend == "rocksdb",
        # scratch (and the stores in it) inside the run's directory: removed with it,
        # also after a kill -9
        **{"spark.driver.memory": memory, "spark.local.dir": str(work / "local")},
    )
    source = _source(keys, hot)
    pipeline = (
        Pipeline("state", parallelism=PARALLELISM)
        .source(source)
        .key_by(lambda r: r[0])
        .process(_aggregate())
        .sink(TransactionalFileSink(str(work / "out")))
        .with_state_backend(backend)
    )
    channel = EmbeddedChannel(str(work / "ckpt"), interval_ms=MANUAL)
    return spark, source, channel, PipelineDriver(pipeline, spark, channel)


def _full_bytes(job: Path, checkpoint_id: int) -> int:
    """What checkpoint ``checkpoint_id`` references: its own directory and every shared
    file its `_metadata` names (the size of a full snapshot of the same state)."""
    from sparkpoint.storage.reading import load_metadata
    from sparkpoint.storage.shared_files import shared_references
    from sparkpoint.storage.uri import parse

    loaded = load_metadata(str(job / f"chk-{checkpoint_id}"))
    shared = shared_references([loaded.checkpoint])
    return du(job / f"chk-{checkpoint_id}") + sum(
        Path(parse(p).path).stat().st_size for p in shared
    )


def run(backend: str, keys: int, hot: bool, work: Path, memory: str) -> dict[str, Any]:
    _spark, source, channel, driver = _driver(backend, keys, hot, work, memory)
    driver.start()
    job = work / "ckpt" / "state"

    def epoch() -> float:
        started = time.perf_counter()
        driver.run(max_epochs=1)
        return time.perf_counter() - started

    source.epoch_records = min(FILL_RECORDS, -(-keys // SPLITS) * SPLITS)
    fill_started = time.perf_counter()
    for _ in range(-(-keys // source.epoch_records)):
        epoch()
    fill_s = time.perf_counter() - fill_started
    source.epoch_records = RECORDS_PER_EPOCH
    epoch()  # warm-up at the timed size
    plain = [epoch() for _ in range(TIMED)]
    # The base: the first checkpoint uploads every file of the stores. The timed ones
    # after it are incremental; compactions make some of them much larger than the
    # others, so the mean (what a checkpoint costs over time) is reported beside the
    # median, over enough checkpoints to include compactions.
    channel.trigger_checkpoint()
    epoch()
    with_checkpoint, written = [], []
    for _ in range(INCREMENTAL_CHECKPOINTS):
        cid = channel.trigger_checkpoint()
        before = du(job / "shared")
        with_checkpoint.append(epoch())
        assert cid in driver.status.acknowledged, driver.status
        written.append(du(job / f"chk-{cid}") + du(job / "shared") - before)
    full = _full_bytes(job, cid) if backend == "rocksdb" else statistics.median(written)
    return {
        "fill_s": fill_s,
        "epoch_s": statistics.median(plain),
        "epoch_checkpoint_s": statistics.median(with_checkpoint),
        "written_bytes": statistics.median(written),
        "written_mean_bytes": statistics.mean(written),
        "full_bytes": full,
        "checkpoint_id": cid,
    }


def restore(
    backend: str, keys: int, hot: bool, work: Path, memory: str, since: float
) -> dict[str, Any]:
    """A new driver after the measured run's kill -9: the newest completed checkpoint on
    disk, then its first epoch; seconds from this process's launch (``since``)."""
    _spark, _source, _channel, driver = _driver(backend, keys, hot, work, memory)
    session_up = time.time()
    restored = driver.start()
    restored_at = time.time()
    driver.run(max_epochs=1)
    done = time.time()
    return {
        "restore_s": done - since,
        "restore_parts_s": {
            "session": session_up - since,
            "restore": restored_at - session_up,
            "first_epoch": done - restored_at,
        },
        "restored_from": None if restored is None else restored.checkpoint_id,
    }
