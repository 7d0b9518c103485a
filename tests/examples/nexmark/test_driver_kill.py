"""A Nexmark query whose driver process is killed with SIGKILL after it has committed
output, then started again: the restart goes on from the newest checkpoint and the
committed output is still exactly the oracle's — nothing lost, nothing twice. A windowed
query (q5) and a join of two sources (q9: each source's offsets and watermarks, the
auctions and the bids waiting in the join's state, its timers)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkpoint.examples.nexmark import oracle
from sparkpoint.ops.devcluster.nexmark import write_events
from sparkpoint.pipeline import TransactionalFileSink
from tests.pipeline.processes import DriverProcess
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SPLITS = 3


@dataclass(frozen=True)
class Run:
    query: str
    events: int
    bytes_per_epoch: int
    #: Of every 50 events, how many the query's keyed stage takes in.
    taken_per_50: int


RUNS = [
    # 15 s of event time: q5's windows (10 s, sliding by 2 s) close from 6 s on, while
    # the stream goes on, so output is committed well before the end.
    Run("q5", 150_000, 1_000_000, 46),
    # 8 s: the first auctions close once the watermark (4 s behind) passes their end;
    # both sources read each file, 1 MB of it an epoch.
    Run("q9", 80_000, 1_000_000, 49),
]


def start(run: Run, work: Path, events_dir: Path) -> DriverProcess:
    n = len(list(work.glob("driver-*.log")))
    progress, log = work / f"progress-{n}.jsonl", work / f"driver-{n}.log"
    command = [
        sys.executable, "-m", "sparkpoint.examples.nexmark", run.query,
        "--events", str(run.events), "--splits", str(SPLITS), "--events-dir", str(events_dir),
        "--out", str(work / "out"), "--checkpoint-dir", str(work / "ckpt"),
        "--parallelism", "2", "--interval-ms", "300",
        "--bytes-per-epoch", str(run.bytes_per_epoch), "--progress", str(progress),
    ]  # fmt: skip
    with log.open("wb") as f:
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return DriverProcess(proc, progress, log)


@pytest.mark.parametrize("run", RUNS, ids=[r.query for r in RUNS])
def test_a_query_killed_and_restarted_commits_its_oracle_result(run: Run, tmp_path: Path) -> None:
    events_dir = write_events(tmp_path / "events", run.events, splits=SPLITS)
    work = tmp_path / "run"
    work.mkdir()
    committed = TransactionalFileSink(str(work / "out")).committed_lines
    first = start(run, work, events_dir)
    try:
        wait_until(lambda: bool(committed()), timeout=600, message="committed output")
    finally:
        first.kill()  # kill -9 of the driver and its JVM; fails if the run had ended
    assert first.proc.returncode != 0
    second = start(run, work, events_dir)
    code = second.wait(timeout=900)
    assert code == 0, second.log.read_text()[-4000:]
    assert second.reports()[0]["restored_from"] is not None
    taken = run.events * run.taken_per_50 // 50
    assert 0 < second.latest()["records"] < taken  # it went on mid-stream, from the checkpoint
    assert oracle.check(run.query, events_dir, work / "out") == []
