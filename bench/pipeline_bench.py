"""Pipeline benchmark (not a test): prints figures and each one's ratio to its anchor.

Same input for everything: newline-delimited JSON click events (the clicks example's
generator, written to files), read 4 files per epoch / micro-batch, on one local[2]
SparkSession, in one run.

1. Records/s of the clicks job with a checkpoint every 10 s, against checkpointing off
   (the anchor): what exactly-once checkpoints cost.
2. Records/s of the same logic on Spark Structured Streaming (``applyInPandasWithState``,
   its own checkpointLocation, file sink), against sparkpoint with checkpoints.
3. Time to resume after the driver is killed (kill -9), for both: from starting the new
   driver process to its first epoch / micro-batch after the restore.

Run:  uv sync --group bench && .venv/bin/python bench/pipeline_bench.py \
          [--records 800000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sparkpoint.examples.clicks import SESSION_GAP_MS, clicks_pipeline
from sparkpoint.pipeline import EmbeddedChannel, FileSource, PipelineDriver
from sparkpoint.pipeline.sources.generator import ClickEventSource

SPLITS = 4
FILES_PER_EPOCH = 4
MANUAL = 3_600_000  # an interval that never fires: checkpointing off


def make_input(directory: Path, records: int, files_per_split: int) -> None:
    """``files_per_split`` files per generator split, named so that a split's files
    sort in stream order."""
    directory.mkdir(parents=True)
    per_split = records // SPLITS
    source = ClickEventSource(
        splits=SPLITS, users=5000, records_per_epoch=SPLITS, records_per_split=per_split
    )
    chunk = per_split // files_per_split
    by_file: dict[str, list[str]] = {}
    for split, position, event in source.all_records():
        name = f"{min(position // chunk, files_per_split - 1):03d}-{split}.jsonl"
        by_file.setdefault(name, []).append(json.dumps(event))
    for name, lines in by_file.items():
        (directory / name).write_text("\n".join(lines) + "\n")


# -- sparkpoint ---------------------------------------------------------------------------


def sparkpoint_driver(
    spark: Any, inbox: Path, work: Path, interval_ms: int, **driver_options: Any
) -> PipelineDriver:
    source = FileSource(
        str(inbox), max_bytes_per_split=1 << 30, max_splits_per_epoch=FILES_PER_EPOCH
    )
    pipeline = clicks_pipeline("bench", source, str(work / "out"), parallelism=4)
    channel = EmbeddedChannel(str(work / "ckpt"), interval_ms=interval_ms)
    return PipelineDriver(pipeline, spark, channel, **driver_options)


def run_sparkpoint(spark: Any, inbox: Path, work: Path, interval_ms: int) -> dict[str, float]:
    sizes = {f.name: f.stat().st_size for f in inbox.iterdir()}
    driver = sparkpoint_driver(spark, inbox, work, interval_ms)
    driver.start()
    started = time.perf_counter()
    driver.run(until=lambda d: d.pipeline.source_op.offsets() == sizes)
    elapsed = time.perf_counter() - started
    driver.close()
    return {
        "records": driver.status.records,
        "seconds": elapsed,
        "records_per_s": driver.status.records / elapsed,
        "checkpoints": len(driver.status.acknowledged),
        "epochs": driver.status.epoch,
    }


# -- Structured Streaming -----------------------------------------------------------------

OUT_SCHEMA = (
    "type string, user string, ts long, clicks long, amount long, pages long, "
    "recent string, start long, end long"
)
STATE_SCHEMA = (
    "clicks long, amount long, pages string, recent string, "
    "s_start long, s_last long, s_clicks long, s_amount long"
)


def _clicks_state(key: tuple[str], frames: Any, state: Any) -> Any:
    """The clicks job's logic as an applyInPandasWithState function."""
    import pandas as pd

    (user,) = key
    if state.exists:
        clicks, amount, pages_json, recent_json, s_start, s_last, s_clicks, s_amount = state.get
        pages, recent = set(json.loads(pages_json)), json.loads(recent_json)
    else:
        clicks = amount = s_clicks = s_amount = 0
        s_start = s_last = -1
        pages, recent = set(), []
    rows = pd.concat(list(frames)).sort_values("ts")
    out = []
    for ts, page, spent in zip(rows["ts"], rows["page"], rows["amount"], strict=True):
        if s_start >= 0 and ts - s_last > SESSION_GAP_MS:
            out.append(("session", user, None, s_clicks, s_amount, None, None, s_start, s_last))
            s_start = -1
        if s_start < 0:
            s_start, s_clicks, s_amount = int(ts), 0, 0
        s_last, s_clicks, s_amount = int(ts), s_clicks + 1, s_amount + int(spent)
        clicks, amount = clicks + 1, amount + int(spent)
        pages.add(page)
        recent = [*recent, page][-3:]
        out.append(("total", user, int(ts), clicks, amount, len(pages), json.dumps(recent),
                    None, None))  # fmt: skip
    state.update(
        (clicks, amount, json.dumps(sorted(pages)), json.dumps(recent),
         s_start, s_last, s_clicks, s_amount)
    )  # fmt: skip
    columns = ["type", "user", "ts", "clicks", "amount", "pages", "recent", "start", "end"]
    yield pd.DataFrame(out, columns=columns)


def ss_query(spark: Any, inbox: Path, work: Path, *, available_now: bool) -> Any:
    events = (
        spark.readStream.schema("user string, ts long, page string, amount long")
        .option("maxFilesPerTrigger", FILES_PER_EPOCH)
        .json(str(inbox))
    )
    writer = (
        events.groupBy("user")
        .applyInPandasWithState(_clicks_state, OUT_SCHEMA, STATE_SCHEMA, "append", "NoTimeout")
        .writeStream.format("json")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "ckpt"))
    )
    writer = writer.trigger(availableNow=True) if available_now else writer
    return writer.start()


def run_structured_streaming(spark: Any, inbox: Path, work: Path) -> dict[str, float]:
    started = time.perf_counter()
    query = ss_query(spark, inbox, work, available_now=True)
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    records = sum(p["numInputRows"] for p in query.recentProgress)
    return {
        "records": records,
        "seconds": elapsed,
        "records_per_s": records / elapsed,
        "batches": len(query.recentProgress),
    }


# -- resume after a driver kill: driver processes -----------------------------------------


def role_main(role: str, inbox: Path, work: Path, progress: Path) -> None:
    """Run as a driver process; append ``{"batch": n, "time": t}`` per epoch/batch."""
    from sparkpoint.pipeline.runtime.spark_session import spark_session

    spark = spark_session("local[2]", f"bench-{role}")

    def report(n: int) -> None:
        with progress.open("a") as f:
            f.write(json.dumps({"batch": n, "time": time.time()}) + "\n")

    if role == "sparkpoint":
        driver = sparkpoint_driver(
            spark, inbox, work, 1000, on_epoch=lambda status: report(status.epoch)
        )
        driver.start()
        driver.run()
        return
    query = ss_query(spark, inbox, work, available_now=False)
    seen = -1
    while query.isActive:
        last = query.lastProgress
        if last is not None and last["batchId"] != seen:
            seen = last["batchId"]
            report(seen)
        time.sleep(0.01)  # polling the query's progress


def resume_time(role: str, inbox: Path, work: Path) -> float:
    """Start a driver, let it complete a few epochs/batches (checkpoints every second
    for sparkpoint; every batch for Structured Streaming), kill -9 it, start it again:
    seconds from the new start to its first epoch/batch."""
    work.mkdir(parents=True)

    def spawn(progress: Path) -> subprocess.Popen[bytes]:
        args = [sys.executable, __file__, "--role", role, "--input", str(inbox),
                "--work", str(work), "--progress", str(progress)]  # fmt: skip
        return subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    def batches(progress: Path) -> list[dict[str, Any]]:
        if not progress.exists():
            return []
        return [json.loads(line) for line in progress.read_text().splitlines()]

    first_progress, second_progress = work / "first.jsonl", work / "second.jsonl"
    first = spawn(first_progress)
    deadline = time.monotonic() + 300
    # Three epochs with checkpoints every second: at least one checkpoint is complete.
    while len(batches(first_progress)) < 3:
        if time.monotonic() > deadline or first.poll() is not None:
            raise RuntimeError(f"{role}: the first driver did not get going")
        time.sleep(0.05)
    time.sleep(1.5)  # let a checkpoint complete after those epochs
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    started = time.time()
    second = spawn(second_progress)
    while not batches(second_progress):
        if time.monotonic() > deadline or second.poll() is not None:
            raise RuntimeError(f"{role}: the restarted driver did not resume")
        time.sleep(0.05)
    resumed = batches(second_progress)[0]["time"] - started
    os.killpg(second.pid, signal.SIGKILL)
    second.wait()
    return resumed


def median_run(results: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median records/s."""
    ordered = sorted(results, key=lambda r: r["records_per_s"])
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=800_000)
    parser.add_argument("--files-per-split", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-resume", action="store_true")
    parser.add_argument("--role", choices=["sparkpoint", "ss"])
    parser.add_argument("--input", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--progress", type=Path)
    args = parser.parse_args()
    if args.role:
        role_main(args.role, args.input, args.work, args.progress)
        return

    from sparkpoint.pipeline.runtime.spark_session import spark_session

    root = Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    inbox = root / "in"
    make_input(inbox, args.records, args.files_per_split)
    spark = spark_session("local[2]", "pipeline-bench")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"input: {args.records} click events in {len(list(inbox.iterdir()))} files ({root})")

    warm = root / "warm-in"
    make_input(warm, 8000, 2)
    run_sparkpoint(spark, warm, root / "warm", MANUAL)
    run_structured_streaming(spark, warm, root / "warm-ss")

    # Rounds in rotating order, medians reported: the machine is shared and noisy.
    runs: dict[str, list[dict[str, float]]] = {"on": [], "off": [], "ss": []}
    order = ["on", "off", "ss"]
    for n in range(args.rounds):
        for mode in order[n % 3 :] + order[: n % 3]:
            work = root / f"{mode}-{n}"
            if mode == "ss":
                result = run_structured_streaming(spark, inbox, work)
            else:
                result = run_sparkpoint(spark, inbox, work, 10_000 if mode == "on" else MANUAL)
            runs[mode].append(result)
            print(f"  round {n + 1} {mode:>3}: {result['records_per_s']:,.0f} records/s")
    spark.stop()
    on, off, ss = (median_run(runs[m]) for m in ("on", "off", "ss"))

    def line(name: str, r: dict[str, float], extra: str) -> None:
        print(f"{name:<44} {r['records_per_s']:>10,.0f} records/s  ({r['records']:,.0f} in "
              f"{r['seconds']:.1f} s; {extra})")  # fmt: skip

    print(f"medians of {args.rounds} rounds:")
    line("sparkpoint, checkpointing off (anchor)", off, f"{off['epochs']:.0f} epochs")
    line(
        "sparkpoint, checkpoint every 10 s",
        on,
        f"{on['epochs']:.0f} epochs, {on['checkpoints']:.0f} checkpoints",
    )
    line("Structured Streaming applyInPandasWithState", ss, f"{ss['batches']:.0f} batches")
    on_off = on["records_per_s"] / off["records_per_s"]
    sp_ss = on["records_per_s"] / ss["records_per_s"]
    print(f"ratio checkpoints on / off:                   {on_off:.2f}")
    print(f"ratio sparkpoint (on) / Structured Streaming: {sp_ss:.2f}")
    if args.skip_resume:
        return
    sp_resume = resume_time("sparkpoint", inbox, root / "resume-sp")
    ss_resume = resume_time("ss", inbox, root / "resume-ss")
    print(f"resume after a driver kill, sparkpoint:           {sp_resume:.1f} s")
    print(f"resume after a driver kill, Structured Streaming: {ss_resume:.1f} s")
    print(f"ratio sparkpoint / Structured Streaming:          {sp_resume / ss_resume:.2f}")


if __name__ == "__main__":
    main()
