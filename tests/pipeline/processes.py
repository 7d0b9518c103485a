"""The clicks job as a real driver process, and the processes around it."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.pipeline import ClickEventSource
from sparkpoint.pipeline.examples.clicks import clicks_pipeline, expected_output
from sparkpoint.pipeline.examples.clicks import expected_state as expected_clicks_state
from sparkpoint.pipeline.sink import TransactionalFileSink
from sparkpoint.pipeline.tasks import keyed_entries
from sparkpoint.recovery import plan_restore
from sparkpoint.statefiles.keys import decode_key
from sparkpoint.storage import load_metadata

SPLITS, USERS, PER_SPLIT, PER_EPOCH = 4, 300, 1600, 400
#: run_clicks's default parallelism.
PARALLELISM = 4


def _source(per_split: int, users: int = USERS) -> ClickEventSource:
    return ClickEventSource(
        splits=SPLITS, users=users, records_per_epoch=PER_EPOCH, records_per_split=per_split
    )


def expected(per_split: int = PER_SPLIT, users: int = USERS) -> list[str]:
    """The output of a driver started with this ``per_split`` (and ``--users users``)."""
    return expected_output(_source(per_split, users).all_records())


def expected_state(per_split: int = PER_SPLIT) -> dict[str, dict[str, Any]]:
    """Each user's keyed state after the whole input (``ClickTotals``'s state names),
    computed offline from the records, as :func:`expected` computes the output."""
    state: dict[str, dict[str, Any]] = {}
    for (user, name), value in expected_clicks_state(_source(per_split).all_records()).items():
        state.setdefault(user, {})[name] = value
    return state


def checkpointed_state(
    metadata: Path, scratch: Path, parallelism: int = PARALLELISM
) -> dict[str, dict[str, Any]]:
    """Each user's keyed state in the checkpoint at ``metadata`` (its directory or its
    `_metadata`), read as a restore at ``parallelism`` reads it: key-group streams or an
    embedded store's shared and private files."""
    graph = clicks_pipeline("clicks", _source(PER_SPLIT), str(scratch / "unused"),
                            parallelism=parallelism).job_graph()  # fmt: skip
    checkpoint = load_metadata(str(metadata)).checkpoint
    plan = plan_restore(checkpoint, graph)
    [process] = [op for op in graph.operators if op.uid == "process"]
    state: dict[str, dict[str, Any]] = {}
    for subtask in plan.operators["process"].subtasks:
        for _, key, value in keyed_entries(subtask, process.max_parallelism, scratch):
            state[str(decode_key(key))] = pickle.loads(value)
    return state


def committed(out: Path) -> list[str]:
    return sorted(TransactionalFileSink(str(out)).committed_lines())


@dataclass
class DriverProcess:
    proc: subprocess.Popen[bytes]
    progress: Path
    log: Path

    def reports(self) -> list[dict[str, Any]]:
        if not self.progress.exists():
            return []
        return [json.loads(line) for line in self.progress.read_text().splitlines() if line]

    def latest(self) -> dict[str, Any]:
        found = self.reports()
        return found[-1] if found else {}

    def signal(self, sig: int) -> None:
        """Signal the driver and its JVM (its own process group)."""
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9 the driver and its JVM (its own process group)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            tail = self.log.read_text()[-4000:]
            raise AssertionError(f"driver did not finish; log:\n{tail}") from exc


def start_driver(
    work: Path,
    *extra: str,
    master: str = "local[2]",
    progress_name: str = "progress",
    per_split: int = PER_SPLIT,
) -> DriverProcess:
    """The clicks job in ``work``; ``progress_name`` tells apart drivers sharing it, and
    ``per_split`` makes a shorter stream (pass the same to :func:`expected`)."""
    work.mkdir(parents=True, exist_ok=True)
    progress = work / f"{progress_name}.jsonl"
    log = work / f"driver-{len(list(work.glob('driver-*.log')))}.log"
    args = [
        sys.executable, "-m", "sparkpoint.pipeline.examples.run_clicks",
        "--checkpoint-dir", str(work / "ckpt"),
        "--savepoint-dir", str(work / "savepoints"),
        "--output", str(work / "out"),
        "--progress", str(progress),
        "--master", master,
        "--splits", str(SPLITS), "--users", str(USERS),
        "--records-per-split", str(per_split), "--records-per-epoch", str(PER_EPOCH),
        "--interval-ms", "300",
        *extra,
    ]  # fmt: skip
    with log.open("wb") as f:
        proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return DriverProcess(proc, progress, log)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def executor_pids(driver_pid: int) -> list[int]:
    """Executor JVMs (CoarseGrainedExecutorBackend) started for this driver."""
    pids = []
    for pid in descendants(driver_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmdline:
            pids.append(pid)
    return pids
