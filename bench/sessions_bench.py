"""Sessionization benchmark (not a test): event-time session windows on sparkpoint, beside
Spark Structured Streaming and PyFlink, in one run; records/s of each and sparkpoint's
ratio to each anchor.

Workload, the same for every system: the deterministic click generator
(``ClickEventSource``: 4 splits, ``--users`` users, a click per split every 50 ms plus up
to 49 ms of jitter, so one user clicks every ``users / 4 * 50`` ms on average), per user
session windows with gap ``--gap-ms`` (default: twice that mean, so ~13 % of a user's
gaps end a session), a bounded-out-of-orderness watermark of 2 s, one result per session
(user, start, end = last click + gap, clicks, amount) into files committed exactly once.
Parallelism 4, ``local[2]`` / a local Flink MiniCluster. The input is bounded: its end
fires the sessions still open. Each system runs in its own processes, one at a time.

- ``sparkpoint``: the sessionization example (``sparkpoint.examples.sessions``:
  ``EventTimeSessionWindows``, an ``AggregateFunction``), ``--per-epoch`` records per
  epoch, a checkpoint every ``--checkpoint-interval-ms`` and a last one at the end
  (bench/sessions_bench_sparkpoint.py).
- ``ss``: Structured Streaming, ``applyInPandasWithState`` with an event-time timeout;
  ``ss-tws``: ``transformWithStateInPandas`` with event-time timers (RocksDB state
  store). The generator as a Python streaming source, ``--per-epoch`` rows per
  micro-batch; a checkpoint every micro-batch, as it always does
  (bench/sessions_bench_ss.py).
- ``pyflink``: PyFlink 2.3, ``EventTimeSessionWindows`` with a Python
  ``AggregateFunction``, Python workers in processes of their own, a checkpoint every
  ``--checkpoint-interval-ms`` (bench/sessions_bench_pyflink.py). apache-flink pins
  versions PySpark does not accept, so it runs in a virtualenv of its own, created on
  first use (``--pyflink-venv``). Its Python windows run at ~1,000 records/s here, so it
  runs only sizes up to ``--pyflink-max-records``.

Figures: seconds from the job's start (Spark session / Flink gateway already up) to its
last output committed; records/s = records / seconds; peak RSS of the process tree.
Every system's sessions are checked against an offline computation (count, clicks,
amount and a checksum of every session): a throughput compares the same work only if
they agree.

Run:  uv sync --group bench && nice -n 10 .venv/bin/python bench/sessions_bench.py \\
          [--records 200000 1000000] [--users 10000] [--systems sparkpoint ss ss-tws pyflink]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessions_bench_common import (
    SPLITS,
    Workload,
    fingerprint,
    mean_user_gap_ms,
    reference_sessions,
)

SYSTEMS = ("sparkpoint", "ss", "ss-tws", "pyflink")
ANCHORS = SYSTEMS[1:]
FLINK_VERSION = "2.3.0"
BENCH = Path(__file__).resolve().parent
SRC = BENCH.parent / "src"
HEADER = (
    f"{'records':>9} {'system':>10} {'seconds':>8} {'rec/s':>9} {'RSS GB':>6} "
    f"{'sessions':>9} {'checksum':>16}  agrees with offline"
)


def pyflink_python(venv: Path) -> Path:
    """The python of PyFlink's own virtualenv; created with apache-flink (and ``mmh3``,
    the one dependency of sparkpoint's generator) when missing."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import mmh3, pyflink.version as v; print(v.__version__)"]
    if python.exists():
        found = subprocess.run(probe, capture_output=True, text=True, check=False)
        if found.stdout.strip() == FLINK_VERSION:
            return python
    print(
        f"creating PyFlink's virtualenv {venv} (apache-flink=={FLINK_VERSION})",
        file=sys.stderr,
        flush=True,
    )
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    packages = [f"apache-flink=={FLINK_VERSION}", "mmh3"]
    if shutil.which("uv"):
        subprocess.run(["uv", "venv", "--python", version, str(venv)], check=True)
        subprocess.run(["uv", "pip", "install", "--python", str(python), *packages], check=True)
    else:
        subprocess.run([f"python{version}", "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", *packages], check=True)
    return python


def _environment(**more: str) -> dict[str, str]:
    """Role processes (and the Python workers they start) import sparkpoint and the
    bench's modules from this checkout."""
    path = os.pathsep.join([str(SRC), str(BENCH), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep), **more}


def _command(system: str, workload: Workload, work: Path, args: argparse.Namespace) -> tuple:
    if system == "pyflink":
        python = pyflink_python(args.pyflink_venv)
        command = [
            str(python),
            str(BENCH / "sessions_bench_pyflink.py"),
            workload.to_json(),
            str(work),
            str(args.checkpoint_interval_ms),
        ]
        # PyFlink runs a local job's Python functions inside the client process (its
        # "loopback" mode: one GIL for every subtask); on a cluster they run in processes
        # of their own, one per task slot, as Spark's Python workers do.
        return command, _environment(_python_worker_execution_mode="process")
    command = [
        sys.executable,
        __file__,
        "--role",
        system,
        "--workload",
        workload.to_json(),
        "--work",
        str(work),
        "--checkpoint-interval-ms",
        str(args.checkpoint_interval_ms),
        "--backend",
        args.backend,
    ]
    return command, _environment()


def _sessions(system: str, work: Path) -> Any:
    if system == "sparkpoint":
        from sessions_bench_sparkpoint import sessions
    elif system == "pyflink":
        from sessions_bench_common import flat_sessions

        return flat_sessions(work / "out", "part-*")
    else:
        from sessions_bench_ss import sessions  # type: ignore[no-redef]
    return sessions(work)


def measure(system: str, workload: Workload, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"sessions-bench-{system}-"))
    row: dict[str, Any] = {"system": system, "records": workload.records}
    try:
        command, environment = _command(system, workload, work, args)
        log = work.parent / f"{work.name}.log"
        with log.open("w") as err:
            done = subprocess.run(
                command, env=environment, stdout=subprocess.PIPE, stderr=err, text=True, check=False
            )
        results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if not results:
            tail = log.read_text(errors="replace")[-1500:]
            raise RuntimeError(f"{system} failed (exit {done.returncode}): {tail}")
        log.unlink()
        row.update(json.loads(results[-1][len("RESULT ") :]))
        row["records_per_s"] = workload.records / row["seconds"]
        row["output"] = fingerprint(_sessions(system, work))
    except (RuntimeError, OSError, ValueError, subprocess.CalledProcessError) as exc:
        row["error"] = str(exc)[-1500:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    row["load_average"] = os.getloadavg()[0]
    return row


def role_main(args: argparse.Namespace) -> None:
    from state_bench_common import report

    workload, work = Workload.from_json(args.workload), Path(args.work)
    if args.role == "sparkpoint":
        import sessions_bench_sparkpoint

        report(
            sessions_bench_sparkpoint.run(workload, work, args.checkpoint_interval_ms, args.backend)
        )
    else:
        import sessions_bench_ss

        report(sessions_bench_ss.run(args.role, workload, work))


def format_row(row: dict[str, Any], expected: dict[str, Any]) -> str:
    head = f"{row['records']:>9} {row['system']:>10}"
    if "error" in row:
        return f"{head} failed: {row['error'].strip().splitlines()[-1][:200]}"
    out = row["output"]
    same = "yes" if out == expected else f"NO (offline: {expected})"
    return (
        f"{head} {row['seconds']:>8.1f} {row['records_per_s']:>9,.0f} "
        f"{row['peak_rss_bytes'] / 1e9:>6.2f} {out['sessions']:>9,} {out['checksum']:>16}  {same}"
    )


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """sparkpoint's records/s over each anchor's, where both ran and agree with offline."""
    rate = {r["system"]: r["records_per_s"] for r in rows if r.get("agrees")}
    if "sparkpoint" not in rate:
        return {}
    return {a: rate["sparkpoint"] / rate[a] for a in ANCHORS if a in rate}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--records",
        type=int,
        nargs="+",
        default=[200_000, 1_000_000],
        help="input sizes, clicks (multiples of 4); default 200000 1000000",
    )
    parser.add_argument("--users", type=int, default=10_000, help="default 10000")
    parser.add_argument(
        "--gap-ms", type=int, help="session gap (default: twice a user's mean time between clicks)"
    )
    parser.add_argument(
        "--per-epoch",
        type=int,
        default=100_000,
        help="records per epoch / micro-batch (default 100000)",
    )
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument(
        "--checkpoint-interval-ms",
        type=int,
        default=10_000,
        help="sparkpoint's and Flink's (default 10000)",
    )
    parser.add_argument(
        "--backend",
        choices=["memory", "rocksdb"],
        default="memory",
        help="sparkpoint's state backend (default memory)",
    )
    parser.add_argument(
        "--pyflink-max-records",
        type=int,
        default=200_000,
        help="PyFlink only up to this size (default 200000)",
    )
    parser.add_argument(
        "--pyflink-venv",
        type=Path,
        default=Path.home() / ".cache" / "sparkpoint" / "pyflink-venv",
        help="PyFlink's virtualenv, created when missing (default %(default)s)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the rows and ratios as one JSON document (the table goes to stderr)",
    )
    parser.add_argument("--role", choices=SYSTEMS[:3], help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.role:
        role_main(args)
        return
    for size in (*args.records, args.per_epoch):
        if size <= 0 or size % SPLITS:
            parser.error(f"--records and --per-epoch must be positive multiples of {SPLITS}")
    if args.users < SPLITS:
        parser.error(f"--users must be at least {SPLITS}")
    gap = args.gap_ms or round(2 * mean_user_gap_ms(args.users))
    table = sys.stderr if args.json else sys.stdout
    print(
        f"users {args.users}, session gap {gap} ms, watermark 2 s behind, "
        f"{args.per_epoch} records per epoch / micro-batch",
        file=table,
        flush=True,
    )
    print(HEADER, file=table, flush=True)
    sizes = []
    for records in args.records:
        workload = Workload(records, args.users, gap, args.per_epoch)
        offline = {
            "pyflink": fingerprint(reference_sessions(workload)),
            "sparkpoint": fingerprint(reference_sessions(workload, merge_touching=False)),
        }
        offline["ss"] = offline["ss-tws"] = offline["pyflink"]
        same = offline["pyflink"] == offline["sparkpoint"]
        print(
            f"{records:>9} {'offline':>10} {'':>8} {'':>9} {'':>6} "
            + (
                f"{offline['pyflink']['sessions']:>9,} {offline['pyflink']['checksum']:>16}"
                if same
                else "clicks exactly one gap apart, where Flink's rule (ss, pyflink: "
                f"{offline['pyflink']['sessions']:,}) and sparkpoint's "
                f"({offline['sparkpoint']['sessions']:,}) differ"
            ),
            file=table,
            flush=True,
        )
        rows = []
        for system in args.systems:
            if system == "pyflink" and records > args.pyflink_max_records:
                continue
            row = measure(system, workload, args)
            row["offline"] = offline[system]
            row["agrees"] = row.get("output") == offline[system]
            print(format_row(row, offline[system]), file=table, flush=True)
            rows.append(row)
        size = {"workload": json.loads(workload.to_json()), "rows": rows, "ratios": ratios(rows)}
        if not same:
            size["note"] = "clicks exactly one gap apart: Flink's rule and sparkpoint's differ"
        print(
            f"{'':>9} sparkpoint rec/s ÷ anchor rec/s: "
            + ("  ".join(f"{a} {r:.2f}" for a, r in size["ratios"].items()) or "-"),
            file=table,
            flush=True,
        )
        sizes.append(size)
    if args.json:
        print(json.dumps({"users": args.users, "gap_ms": gap, "sizes": sizes}, indent=2))


if __name__ == "__main__":
    main()
