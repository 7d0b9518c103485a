"""Nexmark side by side (not a test): the same queries over the same event files on
sparkpoint, Apache Flink 2.3 and Spark Structured Streaming 4.3, each engine's output
checked against the DuckDB oracle on every run.

For each event count the events are generated once (``sparkpoint.ops.devcluster.nexmark``,
one file per split); then for each query each engine runs in its own process session,
one at a time, from its launch to its last committed output:
- ``sparkpoint``: the example package (``python -m sparkpoint.examples.nexmark``), keyed
  state in RocksDB (``--backend``), exactly-once file sink, a checkpoint every 1 s.
- ``flink``: the suite's SQL over a filesystem/JSON table of the same files with the
  suite's watermark (bench/flink/nexmark/*.sql, run by bench/flink/NexmarkSql.java in one
  local JVM), RocksDB with incremental, exactly-once checkpoints every 1 s, its changelog
  to an exactly-once FileSink.
- ``ss``: Structured Streaming (bench/nexmark_bench_ss.py), RocksDB state store, its
  exactly-once file sink, ``Trigger.AvailableNow`` (a checkpoint per micro-batch).

The metric is the suite's: cores x time, here the CPU time (user + system) of every
process of the engine — driver, JVMs, Python workers — from launch to exit, read from the
kernel's accounting: this process is made the child subreaper, so every descendant,
orphaned or not, is reaped here and counted in ``RUSAGE_CHILDREN``. Events/s per core is
events / CPU seconds. Start-up (JVMs, Spark session) is included: use event counts large
enough for it not to matter. Checkpoint size is the largest the engine's checkpoint
directory was while it ran (polled every 0.2 s).

Run (a quiet machine; the figures mean nothing on a loaded one):
    uv sync --group bench --group flink-bench
    nice -n 10 .venv/bin/python bench/nexmark_bench.py --events 10000000 \\
        [--queries q0 q1 …] [--engines sparkpoint flink ss] [--cores 2] [--json]
(every query of the example package unless --queries; exit status 1 if any engine's
output differs from the oracle)
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flink_cluster import JAVA17_OPENS, build_job, flink_home
from nexmark_bench_ss import CANNOT as SS_CANNOT
from nexmark_bench_ss import SQL as SS_SQL
from sparkpoint.examples.nexmark.oracle import (
    committed_rows,
    differences,
    expected_rows,
)
from sparkpoint.examples.nexmark.queries import QUERIES, why_not
from sparkpoint.ops.devcluster.nexmark import SIDE_INPUT, write_events
from state_bench_common import du

ENGINES = ("sparkpoint", "flink", "ss")
FLINK_SQL = Path(__file__).with_name("flink") / "nexmark"
FLINK_JOB = Path(__file__).with_name("flink") / "NexmarkSql.java"
#: The queries of the example package with no Flink SQL here, and why.
FLINK_CANNOT = {
    "q6": "the suite marks it unsupported: Flink's OVER window takes no updating input "
    "(the winning bids of a join)",
}
#: The key of a query whose Flink changelog is an upsert stream though sparkpoint's rows
#: are final (q9's ranking per auction may send +U without its -U, as q18's and q19's).
FLINK_UPSERT_KEYS = {"q9": ("id",)}
SS_ROLE = Path(__file__).with_name("nexmark_bench_ss.py")
INTERVAL_MS = 1_000
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Result:
    query: str
    events: int
    engine: str
    cpu_s: float | None = None
    wall_s: float | None = None
    checkpoint_bytes: int | None = None
    correct: bool | None = None
    differences: list[str] | None = None
    error: str | None = None

    @property
    def per_core(self) -> float | None:
        return self.events / self.cpu_s if self.cpu_s else None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(command: list[str], log: Path, checkpoint_dir: Path) -> tuple[float, float, int]:
    """Run ``command`` in its own session to its end: (CPU seconds of it and every
    descendant, wall seconds, the largest size of ``checkpoint_dir`` meanwhile)."""
    cpu_before, started, peak = _children_cpu(), time.monotonic(), 0
    with log.open("w") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)  # fmt: skip
        while child.poll() is None:
            if checkpoint_dir.exists():
                peak = max(peak, du(checkpoint_dir))
            time.sleep(0.2)
    wall = time.monotonic() - started
    with contextlib.suppress(ProcessLookupError):  # what the engine left running ends too
        os.killpg(child.pid, signal.SIGKILL)
    _reap_orphans()
    if child.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"exit {child.returncode}: {tail}")
    return _children_cpu() - cpu_before, wall, peak


def _reap_orphans() -> None:
    """Wait for every descendant handed to this subreaper, so its CPU time is counted."""
    while True:
        try:
            pid, _status = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run_sparkpoint(query: str, events: int, splits: int, events_dir: Path, work: Path,
                   args: argparse.Namespace) -> Result:  # fmt: skip
    out = work / "out"
    command = [sys.executable, "-m", "sparkpoint.examples.nexmark", query,
               "--events", str(events), "--splits", str(splits),
               "--events-dir", str(events_dir), "--out", str(out),
               "--parallelism", str(args.parallelism), "--master", f"local[{args.cores}]",
               "--interval-ms", str(INTERVAL_MS), "--state-backend", args.backend,
               "--json"]  # fmt: skip
    cpu, wall, peak = measured(command, work / "sparkpoint.log", out / "_checkpoints")
    found = differences(expected_rows(query, events_dir), committed_rows(query, out))
    return Result(query, events, "sparkpoint", cpu, wall, peak, not found, found)


def run_flink(query: str, events: int, events_dir: Path, work: Path,
              args: argparse.Namespace, jar: Path) -> Result:  # fmt: skip
    if not (FLINK_SQL / f"{query}.sql").exists():
        why = FLINK_CANNOT.get(query, "no Flink SQL for it here yet")
        return Result(query, events, "flink", error=f"not run: {why}")
    ddl, sql = work / "ddl.sql", work / f"{query}.sql"
    # q13's side input, under a name Flink's file source reads (it skips names with _)
    side_input = work / "side-input" / "side_input.csv"
    side_input.parent.mkdir()
    shutil.copy(events_dir / SIDE_INPUT, side_input)
    for name, path in (("ddl", ddl), (query, sql)):
        text = (FLINK_SQL / f"{name}.sql").read_text().replace("${EVENTS}", str(events_dir))
        path.write_text(text.replace("${SIDE_INPUT}", str(side_input)))
    out, checkpoints = work / "out", work / "checkpoints"
    log4j = work / "log4j2.properties"
    log4j.write_text(f"rootLogger.level = WARN\nrootLogger.appenderRef.f.ref = F\n"
                     f"appender.f.name = F\nappender.f.type = FILE\n"
                     f"appender.f.fileName = {work / 'flink.log'}\n"
                     f"appender.f.layout.type = PatternLayout\n"
                     f"appender.f.layout.pattern = %d %-5p %c{{1}} - %m%n\n")  # fmt: skip
    home = flink_home()
    command = ["java", f"-Xmx{args.memory}", *JAVA17_OPENS,
               f"-Dlog4j.configurationFile=file:{log4j}",
               "-cp", f"{home / 'lib'}/*:{jar}", "sparkpointbench.NexmarkSql",
               str(ddl), str(sql), str(out), f"file://{checkpoints}",
               str(args.parallelism), str(INTERVAL_MS)]  # fmt: skip
    cpu, wall, peak = measured(command, work / "flink.out", checkpoints)
    key = QUERIES[query].upsert_key or FLINK_UPSERT_KEYS.get(query, ())
    found = differences(expected_rows(query, events_dir), flink_rows(out, key))
    return Result(query, events, "flink", cpu, wall, peak, not found, found)


def _written_order(path: Path) -> tuple[str, str, int]:
    """A subtask's part files in the order it wrote them: bucket, writer, counter."""
    writer, counter = path.name.rsplit("-", 1)
    return path.parent.name, writer, int(counter)


def flink_rows(out: Path, key: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The committed changelog (files not hidden: in-progress ones start with a dot),
    folded: +I and +U add a row, -U and -D take one away. With ``key`` (the query's
    upsert key: Flink's ranking may send +U without its -U) a row replaces its key's."""
    changes = [
        json.loads(line)
        for path in sorted(out.rglob("part-*"), key=_written_order)
        if not path.name.startswith(".")
        for line in path.read_text().splitlines()
    ]
    if key:
        latest: dict[tuple[Any, ...], dict[str, Any]] = {}
        for change in changes:
            k = tuple(change["row"][f] for f in key)
            if change["op"] in ("+I", "+U"):
                latest[k] = change["row"]
            elif latest.get(k) == change["row"]:
                del latest[k]
        return list(latest.values())
    rows: dict[str, tuple[int, dict[str, Any]]] = {}
    for change in changes:
        k = json.dumps(change["row"], sort_keys=True)
        count, row = rows.get(k, (0, change["row"]))
        rows[k] = (count + (1 if change["op"] in ("+I", "+U") else -1), row)
    folded: list[dict[str, Any]] = []
    for count, row in rows.values():
        if count < 0:
            raise ValueError(f"Flink retracted a row it never emitted: {row}")
        folded += [row] * count
    return folded


def run_ss(query: str, events: int, events_dir: Path, work: Path,
           args: argparse.Namespace) -> Result:  # fmt: skip
    if query not in SS_SQL:
        why = SS_CANNOT.get(query, "not written here yet")
        return Result(query, events, "ss", error=f"not run: {why}")
    out, checkpoints = work / "out", work / "checkpoints"
    command = [sys.executable, str(SS_ROLE), query, str(events_dir), str(out), str(checkpoints),
               str(args.parallelism), str(args.cores)]  # fmt: skip
    cpu, wall, peak = measured(command, work / "ss.log", checkpoints)
    expected = expected_rows(query, events_dir)
    columns = list(expected[0]) if expected else []
    found = differences(expected, ss_rows(out, columns))
    return Result(query, events, "ss", cpu, wall, peak, not found, found)


def ss_rows(out: Path, columns: list[str]) -> list[dict[str, Any]]:
    """The rows of the files Structured Streaming's sink log lists as committed (its
    JSON writer leaves null fields out: they come back as None)."""
    committed: set[str] = set()
    for entry in (out / "_spark_metadata").iterdir():
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:  # the first: the log's version
            committed.add(json.loads(line)["path"])
    rows = []
    for path in sorted(committed):
        for line in Path(path.removeprefix("file:")).read_text().splitlines():
            row = json.loads(line)
            rows.append({c: row.get(c) for c in columns} if columns else row)
    return rows


def conditions(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "cores": args.cores,
        "machine_cores": os.cpu_count(),
        "parallelism": args.parallelism,
        "splits": args.splits,
        "backend": args.backend,
        "checkpoint_interval_ms": INTERVAL_MS,
        "flink_memory": args.memory,
    }


def format_row(r: Result, flink: Result | None) -> str:
    head = f"{r.query:>5} {r.events:>10,} {r.engine:>10}"
    if r.error:
        return f"{head} {r.error.splitlines()[-1][:300]}"
    ratio = (
        f"{r.per_core / flink.per_core:>7.2f}"
        if flink and flink.per_core and r.per_core
        else f"{'-':>7}"
    )
    ckpt = f"{r.checkpoint_bytes / 2**20:>9.2f}" if r.checkpoint_bytes else f"{'-':>9}"
    return (
        f"{head} {r.per_core:>11,.0f} {ratio} {r.cpu_s:>7.1f} {r.wall_s:>7.1f} {ckpt} "
        f"{'yes' if r.correct else 'NO':>7}"
    )


HEADER = (
    f"{'query':>5} {'events':>10} {'engine':>10} {'ev/s/core':>11} {'/flink':>7} "
    f"{'cpu s':>7} {'wall s':>7} {'ckpt MiB':>9} {'correct':>7}"
)


def run_engine(engine: str, query: str, events: int, events_dir: Path, work: Path,
               args: argparse.Namespace, jar: Path | None) -> Result:  # fmt: skip
    """One engine's run of one query; a failure is a row that says why."""
    try:
        if engine == "sparkpoint":
            return run_sparkpoint(query, events, args.splits, events_dir, work, args)
        if engine == "flink":
            assert jar is not None
            return run_flink(query, events, events_dir, work, args, jar)
        return run_ss(query, events, events_dir, work, args)
    except (RuntimeError, OSError, ValueError) as exc:
        return Result(query, events, engine, error=f"failed: {exc}"[-800:])


def run_all(args: argparse.Namespace, root: Path, jar: Path | None) -> list[Result]:
    """Every query on every engine, for each event count (the events generated once);
    the rows printed as each query ends, unless --json."""
    results: list[Result] = []
    if not args.json:
        print(HEADER, flush=True)
    events_root = args.events_root or Path(tempfile.gettempdir())
    for events in args.events:
        events_dir = write_events(events_root / f"nexmark-events-{events}-{args.splits}",
                                  events, splits=args.splits)  # fmt: skip
        for query in args.queries:
            by_engine: dict[str, Result] = {}
            for engine in [e for e in ENGINES if e in args.engines]:
                work = root / f"{query}-{events}-{engine}"
                work.mkdir()
                by_engine[engine] = run_engine(engine, query, events, events_dir, work, args, jar)
            results += by_engine.values()
            for r in by_engine.values() if not args.json else ():
                print(format_row(r, by_engine.get("flink")), flush=True)
                for line in r.differences or []:
                    print(f"{'':>28}{line[:300]}")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", nargs="+", default=list(QUERIES),
                        help="default: every query of the example package")  # fmt: skip
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--splits", type=int, default=4, help="event files (4)")
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2,
                        help="Spark's local[N] (default: every core)")  # fmt: skip
    parser.add_argument("--backend", choices=["rocksdb", "memory"], default="rocksdb",
                        help="sparkpoint's keyed state (rocksdb)")  # fmt: skip
    parser.add_argument("--memory", default="2g", help="Flink's -Xmx (2g)")
    parser.add_argument("--events-root", type=Path, help="where event files go (temp)")
    parser.add_argument("--keep", action="store_true", help="keep outputs and logs")
    parser.add_argument("--json", action="store_true", help="one JSON object at the end")
    args = parser.parse_args()

    for query in args.queries:
        if query not in QUERIES:
            parser.error(why_not(query))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        parser.error("cannot become the child subreaper: the CPU of orphans would be lost")
    root = Path(tempfile.mkdtemp(prefix="nexmark-bench-"))
    jar = (
        build_job(flink_home(), root / "flink-build", FLINK_JOB)
        if "flink" in args.engines
        else None
    )
    load_before = os.getloadavg()
    results = run_all(args, root, jar)
    report = {
        "conditions": conditions(args) | {
            "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "results": [asdict(r) | {"events_per_core_second": r.per_core} for r in results],
    }  # fmt: skip
    if args.json:
        print(json.dumps(report))
    else:
        print("conditions: " + ", ".join(f"{k} {v}" for k, v in report["conditions"].items()))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"outputs and logs: {root}", file=sys.stderr)
    return 0 if all(r.correct is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
