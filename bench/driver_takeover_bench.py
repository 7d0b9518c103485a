"""A killed pipeline driver: the warm standby against a cold restart, back to back in one run.

Both sides run the same drill on this machine — `sparkpoint drill kill-driver --local`:
three coordinator processes at the product's defaults, a 3-server ZooKeeper ensemble, the
demo PySpark pipeline (clicks, exactly-once file sink, a checkpoint every 0.5 s) — and
the same figure: from kill -9 of the active driver's process group (Python and its Spark
JVM) to the first checkpoint completed by the driver that replaced it, when the sink's
output becomes visible again.

- warm standby (the figure): a second driver waits, its SparkSession up; the leader
  grants it the job when its probe of the dead driver is refused.
- cold restart (the anchor): no standby; the killed driver is started again at once, as
  the quickest supervisor would, and starts a JVM and a SparkSession first.

    .venv/bin/python bench/driver_takeover_bench.py [--kills 10] [--cold-kills 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def drill(work: Path, kills: int, *extra: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "sparkpoint", "drill", "kill-driver", "--local",
               "--iterations", str(kills), "--dir", str(work), "--report", str(work / "report"),
               "--json", *extra]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if not done.stdout:
        raise SystemExit(f"the drill did not run: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    if not report["ok"]:
        raise SystemExit(f"invariants violated: {report['violations']}")
    return report


def figures(report: dict[str, Any]) -> tuple[float, float, dict[str, float]]:
    times = [it["time_to_checkpoint_s"] for it in report["iterations"]]
    phases = {
        name: statistics.median(it["phases"][name] for it in report["iterations"])
        for name in report["iterations"][0]["phases"]
    }
    return statistics.median(times), max(times), phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="warm-standby kills")
    parser.add_argument("--cold-kills", type=int, default=5, help="cold-restart kills")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sparkpoint-driver-takeover-"))
    results = {}
    for name, kills, extra in (("warm standby", args.kills, ()),
                               ("cold restart", args.cold_kills, ("--cold",))):  # fmt: skip
        median, worst, phases = figures(drill(root / name.replace(" ", "-"), kills, *extra))
        results[name] = median
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        print(f"{name:13s} {kills:2d} kills: median {median:5.2f} s, max {worst:5.2f} s ({parts})")
    warm, cold = results["warm standby"], results["cold restart"]
    print(f"ratio warm standby / cold restart (anchor): {warm / cold:.2f}")
    print(f"reports under {root}")


if __name__ == "__main__":
    main()
