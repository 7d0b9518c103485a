"""The clicks job (or the sessions job) as a real driver process, the processes around
it, and what their output must be, computed offline."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.examples.clicks import clicks_pipeline, expected_output
from sparkpoint.examples.clicks import expected_state as expected_clicks_state
from sparkpoint.examples.run_clicks import EVENT_TIME_DEFAULTS
from sparkpoint.examples.sessions import expected_sessions
from sparkpoint.pipeline import ClickEventSource
from sparkpoint.pipeline.sinks.files import TransactionalFileSink, to_json_line
from sparkpoint.pipeline.state.snapshots import keyed_entries
from sparkpoint.recovery import plan_restore
from sparkpoint.statefiles.keys import decode_key
from sparkpoint.storage import load_metadata
from tests.service.support import ReplicaProcess
from tests.support.waiting import wait_until

SPLITS, USERS, PER_SPLIT, PER_EPOCH = 4, 300, 1600, 400
#: run_clicks's default parallelism.
PARALLELISM = 4


def _source(per_split: int, users: int = USERS, example: str = "clicks") -> ClickEventSource:
    """The clicks a driver started with this ``per_split``, ``users`` and ``example`` reads
    (run_clicks's out-of-order and late defaults for the example)."""
    out_of_order_ms, late_every = EVENT_TIME_DEFAULTS[example]
    return ClickEventSource(
        splits=SPLITS, users=users, records_per_epoch=PER_EPOCH, records_per_split=per_split,
        out_of_order_ms=out_of_order_ms, late_every=late_every,
    )  # fmt: skip


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


def normalized(lines: Iterable[str]) -> list[str]:
    """JSON lines as the sinks write them (sorted keys, compact), sorted."""
    return sorted(to_json_line(json.loads(line)) for line in lines)


def expected_sessions_lines(per_split: int = PER_SPLIT) -> tuple[list[str], list[str]]:
    """``(sessions, late clicks)`` a driver started with ``example="sessions"`` and this
    ``per_split`` commits, computed offline, as :func:`normalized` lines. The source plans
    ``PER_EPOCH // SPLITS`` records of every split per epoch: the epochs the offline
    watermarks follow."""
    out_of_order_ms, _ = EVENT_TIME_DEFAULTS["sessions"]
    sessions, late = expected_sessions(
        _source(per_split, example="sessions").all_records(), PER_EPOCH // SPLITS,
        out_of_order_ms=out_of_order_ms,
    )  # fmt: skip
    fired = ({"key": user, "start": start, "end": end, "value": value}
             for (user, start, end), value in sessions.items())  # fmt: skip
    return sorted(map(to_json_line, fired)), sorted(map(to_json_line, late))


def exactly_once_faults(committed_lines: Iterable[str], expected_lines: Iterable[str]) -> list[str]:
    """How committed lines differ from the expected (:func:`normalized`) ones; empty when
    each expected line is committed as many times as it is expected (once, unless the
    inputs hold equal records) and nothing else is. For window results, each the firing
    of an event-time timer, a line committed twice is a timer fired twice and a missing
    line a lost timer."""
    got, want = Counter(normalized(committed_lines)), Counter(expected_lines)
    faults = [f"committed {n} times: {line}"
              for line, n in sorted(got.items()) if n > max(1, want[line])]  # fmt: skip
    faults += [f"missing: {line}" for line in sorted(want - got)]
    faults += [f"not expected: {line}" for line in sorted(got - want) if line not in want]
    return faults


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
    example: str = "clicks",
) -> DriverProcess:
    """The clicks job in ``work``; ``progress_name`` tells apart drivers sharing it, and
    ``per_split`` makes a shorter stream (pass the same to :func:`expected`).
    ``example="sessions"``: the sessions job, committing sessions to ``work/out`` and late
    clicks to ``work/out-late`` (:func:`expected_sessions_lines`)."""
    work.mkdir(parents=True, exist_ok=True)
    progress = work / f"{progress_name}.jsonl"
    log = work / f"driver-{len(list(work.glob('driver-*.log')))}.log"
    args = [
        sys.executable, "-m", "sparkpoint.examples.run_clicks",
        "--checkpoint-dir", str(work / "ckpt"),
        "--savepoint-dir", str(work / "savepoints"),
        "--output", str(work / "out"),
        "--progress", str(progress),
        "--master", master,
        "--splits", str(SPLITS), "--users", str(USERS),
        "--records-per-split", str(per_split), "--records-per-epoch", str(PER_EPOCH),
        "--interval-ms", "300",
        "--example", example,
        *extra,
    ]  # fmt: skip
    with log.open("wb") as f:
        proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return DriverProcess(proc, progress, log)


def addresses(replicas: Iterable[ReplicaProcess]) -> str:
    """``--coordinator`` for these replicas."""
    return ",".join(f"127.0.0.1:{r.port}" for r in replicas)


def standby_registered(observer: Any, job_id: str) -> bool:
    """A standby driver run of the job waits (as the cluster's job znode says; ``observer``
    is the conftest fixture's connection)."""
    raw, _ = observer.client.get(observer.paths.job(job_id))
    return bool(json.loads(raw).get("standby_run_id"))


def checkpoint_completed(driver: DriverProcess) -> bool:
    """The driver has seen a checkpoint complete."""
    return (driver.latest().get("last_completed") or 0) >= 1


@contextmanager
def active_and_standby(
    work: Path,
    observer: Any,
    job_id: str,
    *args: str,
    ready: Callable[[DriverProcess], bool] = checkpoint_completed,
    **start: Any,
) -> Iterator[tuple[DriverProcess, DriverProcess]]:
    """An active driver of the job in ``work`` (``args`` and ``start`` as
    :func:`start_driver` takes them) once ``ready`` says it got far enough, and a warm
    standby driver registered behind it. Whichever still runs is killed at the end."""
    active = start_driver(work, *args, progress_name="active", **start)
    drivers = [active]
    try:
        wait_until(lambda: ready(active), timeout=400, message="the active driver's progress")
        # Held while the standby starts Spark, so the stream cannot end meanwhile; resumed
        # before the standby registers (and heartbeats, after its warm-up job).
        active.signal(signal.SIGSTOP)
        try:
            standby = start_driver(work, *args, "--standby", progress_name="standby", **start)
            drivers.append(standby)
            wait_until(
                lambda: standby.latest().get("event") == "standby",
                timeout=400,
                message="the standby driver's Spark is up",
            )
        finally:
            active.signal(signal.SIGCONT)
        wait_until(
            lambda: standby_registered(observer, job_id), timeout=400, message="standby waits"
        )
        yield active, standby
    finally:
        for driver in drivers:
            if driver.proc.poll() is None:
                driver.kill()


def kill_active_and_let_the_standby_finish(
    active: DriverProcess, standby: DriverProcess
) -> dict[str, Any]:
    """kill -9 of the active driver (its JVMs too); the standby is granted the job,
    restores a completed checkpoint and runs the stream to its end. Returns the standby's
    last report."""
    active.kill()
    wait_until(
        lambda: any(r.get("event") == "started" for r in standby.reports()),
        timeout=400,
        message="the standby is granted the job and restores",
    )
    started = next(r for r in standby.reports() if r.get("event") == "started")
    assert started["restored_from"] is not None and started["restored_from"] >= 1
    assert standby.wait(timeout=400) == 0, standby.log.read_text()[-4000:]
    last = standby.latest()
    assert last.get("event") == "finished", last
    return last


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
