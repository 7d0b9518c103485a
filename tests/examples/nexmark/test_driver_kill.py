"""A windowed Nexmark query whose driver process is killed with SIGKILL after it has
committed output, then started again: the restart goes on from the newest checkpoint and
the committed output is still exactly the oracle's — nothing lost, nothing twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.examples.nexmark import oracle
from sparkpoint.ops.devcluster.nexmark import write_events
from sparkpoint.pipeline import TransactionalFileSink
from tests.pipeline.processes import DriverProcess
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

#: 15 s of event time: q5's windows (10 s, sliding by 2 s) close from 6 s on, while
#: the stream goes on, so output is committed well before the end.
EVENTS, SPLITS = 150_000, 3


def start(work: Path, events_dir: Path) -> DriverProcess:
    n = len(list(work.glob("driver-*.log")))
    progress, log = work / f"progress-{n}.jsonl", work / f"driver-{n}.log"
    command = [
        sys.executable, "-m", "sparkpoint.examples.nexmark", "q5",
        "--events", str(EVENTS), "--splits", str(SPLITS), "--events-dir", str(events_dir),
        "--out", str(work / "out"), "--checkpoint-dir", str(work / "ckpt"),
        "--parallelism", "2", "--interval-ms", "300", "--bytes-per-epoch", "1000000",
        "--progress", str(progress),
    ]  # fmt: skip
    with log.open("wb") as f:
        proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return DriverProcess(proc, progress, log)


def test_a_windowed_query_killed_and_restarted_commits_its_oracle_result(tmp_path: Path) -> None:
    events_dir = write_events(tmp_path / "events", EVENTS, splits=SPLITS)
    work = tmp_path / "run"
    work.mkdir()
    committed = TransactionalFileSink(str(work / "out")).committed_lines
    first = start(work, events_dir)
    try:
        wait_until(lambda: bool(committed()), timeout=600, message="committed output")
    finally:
        first.kill()  # kill -9 of the driver and its JVM; fails if the run had ended
    assert first.proc.returncode != 0
    second = start(work, events_dir)
    code = second.wait(timeout=900)
    assert code == 0, second.log.read_text()[-4000:]
    assert second.reports()[0]["restored_from"] is not None
    bids = EVENTS * 46 // 50
    assert 0 < second.latest()["records"] < bids  # it went on mid-stream, from the checkpoint
    assert oracle.check("q5", events_dir, work / "out") == []
