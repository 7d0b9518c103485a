"""State benchmark (not a test): keyed state of many keys on sparkpoint's backends, beside
Spark Structured Streaming and Apache Flink, measured in the same run.

Workload: a keyed running aggregate of ~100 bytes per key (count, sum, a 64-character
payload), parallelism 4, ``local[2]``, checkpoints on the local disk. The state is filled
first in large epochs (every key once, 2,000,000 records per epoch), one epoch warms up,
then 200,000-record epochs are timed: 3 without a checkpoint, 3 each followed by one.
Keys of the timed epochs are uniform over all keys, or ``hot``: drawn from 1 % of them.
Then the driver is killed (kill -9 of its process group) and a new driver process
restores the newest checkpoint and runs its first epoch: the restore time.

Systems, each in its own processes, one at a time:
- ``memory``, ``rocksdb``: sparkpoint's in-memory and RocksDB backends
  (bench/state_bench_sparkpoint.py).
- ``ss``, ``ss-python``: Spark Structured Streaming 4.3, RocksDB state store with changelog
  checkpointing; built-in aggregation, or the same logic in ``applyInPandasWithState``
  (bench/state_bench_ss.py; the Python function's fill and timed batches are capped in
  time, the table says how many keys it filled).
- ``flink``: Apache Flink 2.3, RocksDB backend with incremental checkpoints, for bytes per
  checkpoint and checkpoint duration (bench/state_bench_flink.py).

Figures: fill seconds; epoch seconds without and with a checkpoint (Structured Streaming
checkpoints every micro-batch: its batch is in "+ckpt"); checkpoint duration (sparkpoint:
the difference of the two; Flink: its own checkpointDuration); bytes written per
checkpoint (median; sparkpoint: the mean too, over incremental checkpoints that
include compactions) and the size of a full snapshot of the same state; peak RSS of the whole
process tree; records/s of an epoch without a checkpoint (with, for Structured
Streaming); restore seconds from the new driver's launch to its first epoch.

Run:  uv sync --group bench --group flink-bench && nice -n 10 .venv/bin/python \\
          bench/state_bench.py [--keys 100000 1000000 4000000 20000000] [--dists hot uniform]
          [--systems memory rocksdb ss ss-python flink] [--memory 8g] [--results R.jsonl]
      .venv/bin/python bench/state_bench.py --plot R.jsonl   # docs/img/state-bench.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from state_bench_common import RECORDS_PER_EPOCH, report

SYSTEMS = ("memory", "rocksdb", "ss", "ss-python", "flink")
RESTORED = {"memory", "rocksdb", "ss"}  # the others: no restore measured
HEADER = (
    f"{'keys':>10} {'drawn':>7} {'system':>9} {'fill s':>7} {'epoch s':>8} {'+ckpt s':>8} "
    f"{'ckpt s':>7} {'MiB/ckpt':>9} {'mean MiB':>8} {'full MiB':>9} {'% full':>6} {'RSS GB':>6} "
    f"{'rec/s':>8} {'restore s':>9}"
)


def role_main(args: argparse.Namespace) -> None:
    work, hot, keys = Path(args.work), args.dist == "hot", args.keys[0]
    if args.role in ("memory", "rocksdb"):
        import state_bench_sparkpoint as side
    elif args.role in ("ss", "ss-python"):
        import state_bench_ss as side  # type: ignore[no-redef]
    else:
        import state_bench_flink

        report(state_bench_flink.run(keys, hot, work, args.memory))
        return
    if args.since is not None:
        report(side.restore(args.role, keys, hot, work, args.memory, args.since))
        return
    report(side.run(args.role, keys, hot, work, args.memory))
    if args.hold:
        time.sleep(3600)  # until the orchestrator's kill -9


def _role(system: str, keys: int, dist: str, work: Path, memory: str, *, hold: bool = False,
          restore: bool = False) -> dict[str, Any]:  # fmt: skip
    """One role process; its RESULT line. ``hold``: the process is killed with SIGKILL
    (its whole process group: Python driver, Spark's JVM, Python workers) once it reported."""
    command = [sys.executable, __file__, "--role", system, "--dist", dist, "--keys", str(keys),
               "--work", str(work), "--memory", memory]  # fmt: skip
    if hold:
        command.append("--hold")
    if restore:
        command += ["--since", repr(time.time())]
    phase = "restore" if restore else "run"
    with (work / f"{system}-{phase}.log").open("w") as log:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True,
                                 start_new_session=True)  # fmt: skip
        assert child.stdout is not None
        result: dict[str, Any] = {}
        for line in child.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
                break
        if hold and child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    if not result:
        tail = (work / f"{system}-{phase}.log").read_text(errors="replace")[-800:]
        raise RuntimeError(f"{system} {phase} failed (exit {child.returncode}): {tail}")
    return result


def measure(system: str, keys: int, dist: str, memory: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"state-bench-{system}-"))
    row: dict[str, Any] = {"keys": keys, "dist": dist, "system": system, "memory": memory}
    try:
        row.update(_role(system, keys, dist, work, memory, hold=system in RESTORED))
        if system in RESTORED:
            restored = _role(system, keys, dist, work, memory, restore=True)
            row.update({k: v for k, v in restored.items() if k.startswith("restore")})
    except (RuntimeError, OSError, ValueError) as exc:
        row["error"] = str(exc)[-800:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


def _cell(value: Any, width: int, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"{'-':>{width}}"
    return f"{value:>{width}{fmt}}"


def format_row(r: dict[str, Any]) -> str:
    head = f"{r['keys']:>10} {r['dist']:>7} {r['system']:>9}"
    if "error" in r:
        return f"{head} failed: {r['error'].splitlines()[-1][:160]}"
    plain, with_ckpt = r.get("epoch_s"), r.get("epoch_checkpoint_s")
    ckpt = r.get("checkpoint_s", with_ckpt - plain if plain and with_ckpt else None)
    per_epoch = plain or with_ckpt
    full = r.get("full_bytes")
    share = 100 * r["written_bytes"] / full if full else None
    mean = r.get("written_mean_bytes")
    return (
        f"{head} {_cell(r.get('fill_s'), 7, '.1f')} {_cell(plain, 8, '.2f')} "
        f"{_cell(with_ckpt, 8, '.2f')} {_cell(ckpt, 7, '.2f')} "
        f"{_cell(r['written_bytes'] / 2**20, 9, '.2f')} "
        f"{_cell(mean / 2**20 if mean else None, 8, '.2f')} "
        f"{_cell(full / 2**20 if full else None, 9, '.1f')} {_cell(share, 6, '.1f')} "
        f"{_cell(r['peak_rss_bytes'] / 1e9, 6, '.2f')} "
        f"{_cell(RECORDS_PER_EPOCH / per_epoch if per_epoch else None, 8, ',.0f')} "
        f"{_cell(r.get('restore_s'), 9, '.1f')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    dists = ["hot", "uniform"]
    parser.add_argument("--dists", nargs="+", choices=dists, default=dists)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--memory", default="8g",
                        help="spark.driver.memory (local mode: the driver JVM is the executor); "
                             "Flink's -Xmx")  # fmt: skip
    parser.add_argument("--results", type=Path, help="append each row as JSON to this file")
    parser.add_argument("--plot", type=Path, metavar="RESULTS",
                        help="draw docs/img/state-bench.png from a --results file")  # fmt: skip
    parser.add_argument("--table", type=Path, metavar="RESULTS",
                        help="print the table of a --results file")  # fmt: skip
    parser.add_argument("--role", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--dist", choices=["hot", "uniform"], help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--since", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        role_main(args)
        return
    if args.plot or args.table:
        rows = [json.loads(line) for line in (args.plot or args.table).read_text().splitlines()
                if line]  # fmt: skip
        if args.plot:
            from state_bench_plot import plot

            print(plot(rows, Path(__file__).parents[1] / "docs" / "img" / "state-bench.png"))
            return
        print(HEADER)
        order = {"hot": 0, "uniform": 1} | {s: i for i, s in enumerate(SYSTEMS)}
        for row in sorted(rows, key=lambda r: (r["keys"], order[r["dist"]], order[r["system"]])):
            print(format_row(row))
        return
    print(HEADER, flush=True)
    for keys in args.keys:
        for dist in args.dists:
            for system in args.systems:
                row = measure(system, keys, dist, args.memory)
                row["load_average"] = os.getloadavg()[0]
                print(format_row(row), flush=True)
                if args.results:
                    with args.results.open("a") as out:
                        out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
