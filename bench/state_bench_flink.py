"""The Flink side of bench/state_bench.py: Apache Flink 2.3 running the same keyed aggregate
(bench/flink/KeyedAggregate.java) on its RocksDB backend with incremental checkpoints, in
one local JVM (Flink's MiniCluster: a plain ``java`` process on the jars of the
apache-flink-libraries wheel, the failover bench's mechanism, bench/flink_cluster.py).

The job fills the state unthrottled, then draws its keys at 50,000 records/s with a
checkpoint every 4 s: one checkpoint per 200,000 records, the sparkpoint bench's epoch.
Checkpoint durations come from Flink's own log ("Completed checkpoint …
checkpointDuration"); bytes written per checkpoint are the files created under its
checkpoint directory between two completions (every checkpoint is retained, so none is
deleted meanwhile), the same measure as on the sparkpoint side.
"""

from __future__ import annotations

import itertools
import re
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from flink_cluster import JAVA17_OPENS, build_job, flink_home
from state_bench_common import PARALLELISM, RECORDS_PER_EPOCH, TIMED, files

RATE = 50_000
INTERVAL_MS = 4_000  # RATE x interval = RECORDS_PER_EPOCH
STEADY_CHECKPOINTS = TIMED + 3
JOB_SOURCE = Path(__file__).with_name("flink") / "KeyedAggregate.java"
LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{UNIX_MILLIS}} %-5p %c{{1}} - %m%n
"""
COMPLETED = re.compile(
    r"^(\d+) .*Completed checkpoint (\d+) for job \w+ \((\d+) bytes, checkpointDuration=(\d+) ms"
)


def run(keys: int, hot: bool, work: Path, memory: str) -> dict[str, Any]:
    home = flink_home()
    jar = build_job(home, work / "build", JOB_SOURCE)
    log = work / "flink.log"
    (work / "log4j2.properties").write_text(LOG4J.format(log=log))
    ckpt = work / "flink-ckpt"
    steady = RECORDS_PER_EPOCH * STEADY_CHECKPOINTS
    command = [
        "java", f"-Xmx{memory}", *JAVA17_OPENS,
        f"-Dlog4j.configurationFile=file:{work / 'log4j2.properties'}",
        "-cp", f"{home / 'lib'}/*:{jar}", "sparkpointbench.KeyedAggregate",
        str(keys), str(hot).lower(), f"file://{ckpt}", str(PARALLELISM), str(steady),
        str(RATE), str(INTERVAL_MS),
    ]  # fmt: skip
    started = time.time()
    files = _watch(command, ckpt, work / "flink.out")
    output = (work / "flink.out").read_text(errors="replace")
    filled = max(int(line.split()[1]) for line in output.splitlines()
                 if line.startswith("FILLED "))  # fmt: skip
    completions = [
        (int(m[1]), int(m[2]), int(m[3]), int(m[4]))
        for m in map(COMPLETED.match, log.read_text().splitlines())
        if m
    ]
    written, durations = [], []
    for previous, current in itertools.pairwise(completions[:-1]):  # the last: end of input
        if previous[0] < filled + INTERVAL_MS:  # the interval must be wholly after the fill
            continue
        written.append(sum(size for at, size in files.values() if previous[0] < at <= current[0]))
        durations.append(current[3] / 1000)
    return {
        "fill_s": filled / 1000 - started,
        "epoch_s": None,
        "epoch_checkpoint_s": None,
        "checkpoint_s": statistics.median(durations),
        "written_bytes": statistics.median(written),
        "full_bytes": completions[-2][2],  # Flink's state size of the last steady checkpoint
        "steady_checkpoints": len(written),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }


def _watch(command: list[str], ckpt: Path, output: Path) -> dict[Path, tuple[float, int]]:
    """Run the job; every file seen under ``ckpt`` meanwhile → (mtime in ms, size). Flink
    discards a finished job's checkpoints, so they are looked at while it runs."""
    seen: dict[Path, tuple[float, int]] = {}
    with output.open("w") as out:
        job = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        while job.poll() is None:
            for path, status in files(ckpt):
                seen[path] = (status.st_mtime * 1000, status.st_size)
            time.sleep(0.2)
    if job.returncode != 0:
        tail = output.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"the Flink job failed (exit {job.returncode}): {tail}")
    return seen
