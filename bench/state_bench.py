"""State benchmark (not a test): keyed state of many keys, per backend, beside Spark
Structured Streaming's RocksDB state store, measured in the same run.

Workload: a keyed running aggregate of ~100 bytes per key (count, sum, a 64-character
payload), 200,000 records per epoch, parallelism 4, ``local[2]``, checkpoints on the
local disk. The state is filled first (every key once), then timed: epochs without a
checkpoint, then epochs each followed by a checkpoint. Keys of the timed epochs are
uniform over all keys, or ``hot``: drawn from 1 % of them.

Figures per configuration: epoch seconds without and with a checkpoint, checkpoint
duration (the difference), bytes written per checkpoint, peak RSS of the whole process
tree (driver, JVM, Python workers: the sum of each process's peak), and records/s. Each
configuration runs in its own process. The anchor is Structured Streaming 4.3 with the
RocksDB state store and changelog checkpointing (built-in aggregation, same workload
from its ``rate-micro-batch`` source, a checkpoint every micro-batch as it always does).

Run:  uv sync --group bench && nice -n 10 .venv/bin/python bench/state_bench.py \
          [--keys 100000 1000000] [--dists hot uniform] [--systems memory rocksdb ss]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORDS_PER_EPOCH = 200_000
SPLITS = 4
PARALLELISM = 4
TIMED = 3
MANUAL = 3_600_000
PAYLOAD = 64


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
        space = max(1, self.keys // 100) if self.hot else self.keys
        for i in range(split.start, split.end):
            g = i * SPLITS + number
            x = _mix(g)
            yield i, (g if g < self.keys else x % space, x & 0xFFFF)


def _source(keys: int, hot: bool) -> Any:
    from sparkpoint.pipeline.sources.generator import ClickEventSource

    class KeySource(ClickEventSource):
        def __init__(self) -> None:
            super().__init__(splits=SPLITS, records_per_epoch=RECORDS_PER_EPOCH)
            self._reader = KeyReader(keys, hot)  # type: ignore[assignment]

    return KeySource()


def _aggregate() -> Any:
    from sparkpoint.pipeline.functions import KeyedProcessFunction
    from sparkpoint.pipeline.keyed_state import ValueStateDescriptor

    class RunningAggregate(KeyedProcessFunction):
        def open(self, ctx: Any) -> None:
            self.total = ctx.get_state(ValueStateDescriptor("total"))

        def process_element(self, key: Any, value: Any, ctx: Any) -> None:
            found = self.total.value()
            count, amount = (0, 0) if found is None else found[:2]
            self.total.update((count + 1, amount + value[1], f"{key:0{PAYLOAD}d}"))

    return RunningAggregate()


def _tree_peak_rss() -> int:
    """Sum of VmHWM over this process and its descendants (bytes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    total, todo = 0, [int(Path("/proc/self").resolve().name)]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def run_sparkpoint(backend: str, keys: int, hot: bool, work: Path, memory: str) -> dict[str, Any]:
    from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
    from sparkpoint.pipeline.builder import Pipeline
    from sparkpoint.pipeline.session import spark_session
    from sparkpoint.pipeline.sink import TransactionalFileSink

    spark = spark_session(
        "local[2]",
        "state-bench",
        state_in_place=backend == "rocksdb",
        **{"spark.driver.memory": memory},
    )
    pipeline = (
        Pipeline("state", parallelism=PARALLELISM)
        .source(_source(keys, hot))
        .key_by(lambda r: r[0])
        .process(_aggregate())
        .sink(TransactionalFileSink(str(work / "out")))
        .with_state_backend(backend)
    )
    channel = EmbeddedChannel(str(work / "ckpt"), interval_ms=MANUAL)
    driver = PipelineDriver(pipeline, spark, channel)
    driver.start()
    fill = -(-keys // RECORDS_PER_EPOCH) + 1  # every key once, and one epoch to warm up

    def epoch() -> float:
        started = time.perf_counter()
        driver.run(max_epochs=1)
        return time.perf_counter() - started

    for _ in range(fill):
        epoch()
    plain = [epoch() for _ in range(TIMED)]
    with_checkpoint, written = [], []
    for _ in range(TIMED):
        cid = channel.trigger_checkpoint()
        before = _du(work / "ckpt" / "state" / "shared")
        with_checkpoint.append(epoch())
        assert cid in driver.status.acknowledged, driver.status
        written.append(
            _du(work / "ckpt" / "state" / f"chk-{cid}")
            + _du(work / "ckpt" / "state" / "shared")
            - before
        )
    driver.close()
    spark.stop()
    return {
        "epoch_s": statistics.median(plain),
        "epoch_checkpoint_s": statistics.median(with_checkpoint),
        "written_bytes": statistics.median(written),
    }


def run_structured_streaming(keys: int, hot: bool, work: Path, memory: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from sparkpoint.pipeline.session import spark_session

    spark = spark_session(
        "local[2]",
        "state-bench-ss",
        **{
            "spark.driver.memory": memory,
            "spark.sql.shuffle.partitions": str(PARALLELISM),
            "spark.sql.streaming.stateStore.providerClass": (
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
            ),
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        },
    )
    space = max(1, keys // 100) if hot else keys
    rows = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", RECORDS_PER_EPOCH)
        .option("numPartitions", SPLITS)
        .load()
    )
    keyed = rows.select(
        F.when(F.col("value") < keys, F.col("value"))
        .otherwise(F.pmod(F.xxhash64("value"), F.lit(space)))
        .alias("k"),
        (F.col("value") % 65536).alias("a"),
    )
    aggregated = keyed.groupBy("k").agg(
        F.count("*").alias("n"), F.sum("a").alias("s"), F.max(F.lpad("k", PAYLOAD, "0"))
    )
    query = (
        aggregated.writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(work / "ss-ckpt"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    fill = -(-keys // RECORDS_PER_EPOCH) + 1
    batches: list[dict[str, Any]] = []
    growth: list[int] = []
    while len(batches) < fill + TIMED:
        size = _du(work / "ss-ckpt")
        done = len(query.recentProgress)
        while len(query.recentProgress) <= done:
            time.sleep(0.05)  # polling the query's progress (a bench, not a test)
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        growth.append(_du(work / "ss-ckpt") - size)
    query.stop()
    spark.stop()
    timed = batches[fill : fill + TIMED]
    seconds = [p["durationMs"]["triggerExecution"] / 1000 for p in timed]
    return {
        "epoch_s": None,
        "epoch_checkpoint_s": statistics.median(seconds),
        "written_bytes": statistics.median(growth[-TIMED:]),
    }


def role_main(args: argparse.Namespace) -> None:
    work = Path(args.work)
    hot = args.dist == "hot"
    if args.role == "ss":
        result = run_structured_streaming(args.keys[0], hot, work, args.memory)
    else:
        result = run_sparkpoint(args.role, args.keys[0], hot, work, args.memory)
    result["peak_rss_bytes"] = _tree_peak_rss()
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dists", nargs="+", default=["hot", "uniform"])
    parser.add_argument("--systems", nargs="+", default=["memory", "rocksdb", "ss"])
    parser.add_argument("--memory", default="8g", help="spark.driver.memory (local mode)")
    parser.add_argument("--role", choices=["memory", "rocksdb", "ss"])
    parser.add_argument("--dist", choices=["hot", "uniform"])
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.role:
        role_main(args)
        return
    print(f"{'keys':>10} {'keys drawn':>8} {'system':>8} {'epoch s':>8} {'+ckpt s':>8} "
          f"{'ckpt s':>7} {'MiB/ckpt':>9} {'RSS GB':>7} {'rec/s':>9}  ratio to SS")  # fmt: skip
    for keys in args.keys:
        for dist in args.dists:
            rows: dict[str, dict[str, Any]] = {}
            for system in args.systems:
                work = Path(tempfile.mkdtemp(prefix=f"state-bench-{system}-"))
                out = subprocess.run(
                    [sys.executable, __file__, "--role", system, "--dist", dist,
                     "--keys", str(keys), "--work", str(work), "--memory", args.memory],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                shutil.rmtree(work, ignore_errors=True)
                found = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
                if not found:
                    print(f"{keys:>10} {dist:>8} {system:>8} failed: {out.stderr[-600:]}")
                    continue
                rows[system] = json.loads(found[0][len("RESULT ") :])
            anchor = rows.get("ss", {}).get("epoch_checkpoint_s")
            for system, r in rows.items():
                plain = r["epoch_s"] or r["epoch_checkpoint_s"]
                ckpt = r["epoch_checkpoint_s"] - r["epoch_s"] if r["epoch_s"] else None
                ratio = f"{r['epoch_checkpoint_s'] / anchor:.2f}" if anchor else "-"
                print(
                    f"{keys:>10} {dist:>8} {system:>8} "
                    f"{r['epoch_s'] or float('nan'):>8.2f} {r['epoch_checkpoint_s']:>8.2f} "
                    f"{ckpt if ckpt is not None else float('nan'):>7.2f} "
                    f"{r['written_bytes'] / 2**20:>9.2f} {r['peak_rss_bytes'] / 1e9:>7.2f} "
                    f"{RECORDS_PER_EPOCH / plain:>9,.0f}  {ratio}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
