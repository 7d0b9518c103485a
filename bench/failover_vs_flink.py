"""Leader failover with the real pipeline, beside Apache Flink, back to back in one run.

Both sides under the same conditions on this machine: a 3-server ZooKeeper 3.9.5 ensemble
from pyspark's jars, the same session timeout, a keyed running-sum job checkpointing every
second, N x kill -9 of the leading JobManager / coordinator. The figure is the time from
the kill to the first checkpoint completed after it — for a pipeline with a transactional
sink, when its output becomes visible again.

- sparkpoint: `sparkpoint drill kill-leader --local` (3 coordinators, the demo PySpark
  pipeline with its exactly-once sink; everything else at the product's defaults).
- Flink 2.3: two JobManagers and one TaskManager (Flink's own jars from the
  apache-flink-libraries wheel, plain `java` processes, Flink's defaults otherwise) running
  bench/flink/RunningSum.java; completion times come from Flink's REST API.

    uv sync --group flink-bench
    .venv/bin/python bench/failover_vs_flink.py [--kills 6] [--session-timeout 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flink_cluster import (
    FlinkCluster,
    FlinkUnavailable,
    build_job,
    flink_cluster,
    flink_home,
    wait_until,
)
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper


def flink_failovers(cluster: FlinkCluster, job_id: str, kills: int, settle_s: float) -> list[float]:
    """kill -9 the leading JobManager ``kills`` times; seconds from each kill to the first
    checkpoint Flink completes after it (its last acknowledgement, by Flink's own clock)."""
    times: list[float] = []
    for i in range(kills):
        leader = wait_until(lambda: _try(cluster.leader), 60.0, "a leading JobManager")
        other = next(jm for jm in cluster.job_managers if jm is not leader)
        _wait_checkpointing(cluster, leader, job_id, settle_s)
        killed_ms = time.time() * 1000
        cluster.kill(leader)
        completed = wait_until(
            lambda other=other, killed_ms=killed_ms: _completed_after(
                cluster, other, job_id, killed_ms
            ),
            180.0,
            "Flink's first checkpoint after the kill",
            every=0.1,
        )
        times.append((float(completed["latest_ack_timestamp"]) - killed_ms) / 1000)
        print(f"   Flink kill {i + 1:2d}: {times[-1]:5.2f} s (checkpoint {completed['id']})",
              flush=True)  # fmt: skip
        cluster.start_job_manager(leader)  # back as the standby
    return times


def _try(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except RuntimeError:
        return None


def _completed_after(cluster, jm, job_id: str, after_ms: float):  # type: ignore[no-untyped-def]
    completed = cluster.latest_completed(jm, job_id)
    if completed and float(completed["latest_ack_timestamp"]) > after_ms:
        return completed
    return None


def _wait_checkpointing(cluster, jm, job_id: str, settle_s: float) -> None:  # type: ignore[no-untyped-def]
    """Steady before each kill: the job checkpoints again and has for ``settle_s``."""
    since = time.time() * 1000 + settle_s * 1000
    wait_until(lambda: _completed_after(cluster, jm, job_id, since), 180.0,
               "Flink to checkpoint steadily", every=0.2)  # fmt: skip


def sparkpoint_failovers(kills: int, session_s: float, takeover_s: float | None,
                         interval_ms: int, report: Path) -> dict[str, object]:  # fmt: skip
    command = [sys.executable, "-m", "sparkpoint", "drill", "kill-leader", "--local",
               "--iterations", str(kills), "--session-timeout", f"{session_s:g}",
               "--checkpoint-interval", f"{interval_ms / 1000:g}",
               "--report", str(report)]  # fmt: skip
    if takeover_s is not None:
        command += ["--takeover-timeout", f"{takeover_s:g}"]
    print("   $ " + " ".join(command[1:]), flush=True)
    done = subprocess.run(command, check=False)
    if done.returncode == 2:
        raise SystemExit("the sparkpoint drill could not run (see its output above)")
    loaded: dict[str, object] = json.loads((report / "report.json").read_text())
    return loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=6, help="kill -9 of the leader, each side")
    parser.add_argument("--session-timeout", type=float, default=5.0, help="ZooKeeper (s)")
    parser.add_argument(
        "--takeover-timeout",
        type=float,
        default=None,
        help="sparkpoint's lease takeover (s); default: the product's",
    )
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument(
        "--records-per-second", type=int, default=20_000, help="Flink job's generated input rate"
    )
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds of steady checkpointing before each kill"
    )
    parser.add_argument(
        "--report", type=Path, default=None, help="keep the sparkpoint drill's report here"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkpoint-vs-flink-") as tmp:
        work = Path(tmp)
        print(f"sparkpoint: {args.kills} x kill -9 of the leading coordinator", flush=True)
        drill = sparkpoint_failovers(
            args.kills,
            args.session_timeout,
            args.takeover_timeout,
            args.checkpoint_interval_ms,
            args.report or work / "drill",
        )
        ours = [float(it["time_to_checkpoint_s"]) for it in drill["iterations"]  # type: ignore[attr-defined]
                if it.get("time_to_checkpoint_s") is not None]  # fmt: skip
        print(f"Flink 2.3: {args.kills} x kill -9 of the leading JobManager", flush=True)
        try:
            with LocalZooKeeper(work / "zk", servers=3, tick_time_ms=200) as zk:
                jar = build_job(flink_home(), work)
                with flink_cluster(work / "flink", zk.connect_string, args.session_timeout) as c:
                    job = c.submit(jar, args.records_per_second, args.checkpoint_interval_ms)
                    flink = flink_failovers(c, job, args.kills, args.settle)
        except FlinkUnavailable as exc:
            raise SystemExit(f"cannot run the Flink anchor: {exc}") from None
    config = drill.get("config", {})
    print(
        f"\nConditions: {args.kills} kills each, ZooKeeper 3 servers, session "
        f"{args.session_timeout:g} s, checkpoint every {args.checkpoint_interval_ms} ms; "
        f"sparkpoint takeover {config.get('takeover_timeout_s')} s, "  # type: ignore[union-attr]
        f"drill violations: {len(drill.get('violations', []))}"
    )  # type: ignore[arg-type]
    print("kill -9 -> first checkpoint completed after it")
    print("            median     max     min")
    for name, values in (("sparkpoint", ours), ("Flink 2.3", flink)):
        print(f"{name:10} {statistics.median(values):6.2f} s {max(values):6.2f} s "
              f"{min(values):6.2f} s")  # fmt: skip
    print(
        f"ratio (Flink median / sparkpoint median): "
        f"{statistics.median(flink) / statistics.median(ours):.2f}x"
    )


if __name__ == "__main__":
    main()
