"""Failover with leases vs the session timeout (the anchor: what failover costs without them).

Two replica processes (`sparkpoint coordinator run`) on a real local ZooKeeper; a driver
(the real client, in this process) checkpoints every 100 ms. Each run signals the leader
and measures the time to the first checkpoint completed by the new leader. Runs at two
session timeouts show that failover no longer depends on it: the lease takeover timeout
(default here 1 s) governs it instead.

    .venv/bin/python bench/failover_bench.py [--runs 20] [--sessions 5 30] [--takeover 1]

This is the coordinator alone with a synthetic driver. The real pipeline beside Apache Flink,
both measured in the same run, is bench/failover_vs_flink.py.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
from pathlib import Path

from service_bench import one_failover
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper


def measure(quorum: str, root: Path, runs: int, session: float, takeover: float, sig: int):  # type: ignore[no-untyped-def]
    times = []
    for i in range(runs):
        times.append(one_failover(quorum, root / f"{sig}-{session:g}-{i}", session, takeover, sig))
        print(f"   run {i + 1:2d}: {times[-1]:5.2f} s", flush=True)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sessions", type=float, nargs="+", default=[5.0, 30.0])
    parser.add_argument("--takeover", type=float, default=1.0, help="lease takeover timeout (s)")
    parser.add_argument("--sigterm-runs", type=int, default=10)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sparkpoint-failover-bench-") as tmp:
        root = Path(tmp)
        with LocalZooKeeper(root / "zk", servers=1, tick_time_ms=200) as zk:
            for session in args.sessions:
                print(f"kill -9, session {session:g} s, takeover {args.takeover:g} s")
                med, worst = measure(zk.connect_string, root, args.runs, session,
                                     args.takeover, signal.SIGKILL)  # fmt: skip
                rows.append(("kill -9", session, args.runs, med, worst))
            session = args.sessions[-1]
            print(f"SIGTERM, session {session:g} s, takeover {args.takeover:g} s")
            med, worst = measure(zk.connect_string, root, args.sigterm_runs, session,
                                 args.takeover, signal.SIGTERM)  # fmt: skip
            rows.append(("SIGTERM", session, args.sigterm_runs, med, worst))
    print("\nsignal   session  runs  median    max   x session")
    for name, session, runs, med, worst in rows:
        print(f"{name:8} {session:6.0f} s {runs:5d} {med:6.2f} s {worst:5.2f} s "
              f"{med / session:10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
