"""Run one Nexmark query on sparkpoint: ``python -m sparkpoint.examples.nexmark QUERY``.

Generates ``--events`` events into ``--events-dir`` (once: a directory made with the same
settings is reused), runs the query over them on Spark from the first event to the last,
with a checkpoint every ``--interval-ms``, and commits its rows as JSON lines under
``--out``. ``--check`` compares them with the query's result computed by DuckDB.
A driver killed before is started again with the same ``--out`` and ``--checkpoint-dir``:
it goes on from the newest checkpoint there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkpoint.examples.driver_process import progress_reporter
from sparkpoint.examples.nexmark.queries import LEFT_OUT, QUERIES, why_not
from sparkpoint.examples.nexmark.run import run_query
from sparkpoint.pipeline import BACKEND_NAMES, spark_session


def _queries_help() -> str:
    lines = ["queries:"]
    lines += [f"  {q.name:<4} {q.summary}" for q in QUERIES.values()]
    lines += ["left out:"]
    lines += [f"  {name:<4} {why}" for name, why in LEFT_OUT.items()]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sparkpoint.examples.nexmark",
        description=__doc__,
        epilog=_queries_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", help="q0, q1, … (listed below)")
    p.add_argument("--events", type=int, default=100_000, help="events, all kinds (100000)")
    p.add_argument("--splits", type=int, default=4, help="event files, read in parallel (4)")
    p.add_argument(
        "--events-dir", help="where the event files are or go (default: in the temp directory)"
    )
    p.add_argument("--out", help="a new directory for the output (default: a temp directory)")
    p.add_argument(
        "--checkpoint-dir",
        help="default: <out>/_checkpoints; given, --out may hold the output of a run "
        "killed before, which goes on from the newest checkpoint",
    )
    p.add_argument("--bytes-per-epoch", type=int, default=4 << 20, help="of each file (4 MiB)")
    p.add_argument("--progress", help="append one JSON line per epoch to this file")
    p.add_argument("--parallelism", type=int, default=4)
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--interval-ms", type=int, default=1_000, help="checkpoint interval (1000)")
    p.add_argument(
        "--state-backend",
        choices=BACKEND_NAMES,
        help="where keyed state lives (default: $SPARKPOINT_STATE_BACKEND, else memory)",
    )
    p.add_argument("--check", action="store_true", help="compare the output with DuckDB's")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    return p


def generate(events: int, splits: int, events_dir: str) -> None:
    """The event files, by the generator's own command (a tool beside the example)."""
    command = [sys.executable, "-m", "sparkpoint.ops.devcluster.nexmark",
               "--events", str(events), "--splits", str(splits), "--out", events_dir]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.query not in QUERIES:
        p.error(why_not(args.query))
    if not 1 <= args.splits <= args.events:
        p.error(f"need 1 ≤ --splits ≤ --events, got {args.splits} and {args.events}")
    out = Path(args.out or tempfile.mkdtemp(prefix=f"nexmark-{args.query}-"))
    if out.exists() and any(out.iterdir()) and not args.checkpoint_dir:
        p.error(f"--out {out} is not empty: give a new directory (or --checkpoint-dir)")
    events_dir = args.events_dir or str(
        Path(tempfile.gettempdir()) / f"nexmark-events-{args.events}-{args.splits}"
    )
    generate(args.events, args.splits, events_dir)

    on_disk = args.state_backend == "rocksdb" or None
    spark = spark_session(args.master, f"nexmark-{args.query}", state_in_place=on_disk)
    try:
        run = run_query(
            args.query, events_dir, str(out), spark,
            args.checkpoint_dir or str(out / "_checkpoints"),
            parallelism=args.parallelism, interval_ms=args.interval_ms,
            bytes_per_epoch=args.bytes_per_epoch, state_backend=args.state_backend,
            on_epoch=progress_reporter(args.progress),
        )  # fmt: skip
    finally:
        spark.stop()
    result = {
        "query": run.query,
        "state_backend": args.state_backend or "default",
        "events": args.events,
        "parallelism": run.parallelism,
        "epochs": run.epochs,
        "seconds": round(run.seconds, 3),
        "events_per_second": round(args.events / run.seconds),
        "output": str(out),
    }
    if args.check:
        from sparkpoint.examples.nexmark.oracle import check

        result["differences"] = check(args.query, events_dir, out)
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name}: {value}")
    return 1 if result.get("differences") else 0


if __name__ == "__main__":
    sys.exit(main())
