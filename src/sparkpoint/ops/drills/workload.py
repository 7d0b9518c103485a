"""What keeps checkpoints completing during a drill.

- :class:`AckDriver`: a thread acting as a pipeline driver through the real client —
  registers a job, heartbeats, acknowledges every trigger at once. Light and fast; used
  against remote deployments and for the ZooKeeper and zombie drills.
- :class:`ClicksPipeline`: the demo pipeline (``sparkpoint.examples.run_clicks``)
  as a real PySpark driver process against the replicas, with a transactional file sink,
  which lets the drill check exactly-once output at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sparkpoint.checkpoint import (
    InlineStateHandle,
    JobGraph,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSpec,
    OperatorSubtaskState,
)
from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.ops.drills.invariants import (
    CompletionNotice,
    Invariant,
    check_exactly_once,
    clicks_read_per_split,
)


class Workload(Protocol):
    job_id: str
    interval_ms: int

    def start(self) -> None: ...

    def finish(self, timeout: float) -> Invariant | None:
        """Stop; return the exactly-once verdict where the workload can give one."""
        ...

    def abort(self) -> None: ...

    def notices(self) -> list[dict[str, Any]]:
        """Every notice the driver(s) received, in order, as sent (type, checkpoint_id,
        metadata_uri, reason…), each with ``receiver``: which driver run heard it."""
        ...


def completions(notices: list[dict[str, Any]]) -> list[CompletionNotice]:
    return [CompletionNotice(int(n["checkpoint_id"]), n.get("metadata_uri"),
                             str(n.get("receiver", "")))
            for n in notices if n.get("type") == "complete"]  # fmt: skip


def aborts(notices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in notices if n.get("type") == "abort"]


def _inline_state(subtask: int, parallelism: int, max_parallelism: int) -> OperatorSubtaskState:
    # Key groups of the subtask as in docs/architecture.md §6; a tiny inline stream is enough:
    # the drill exercises coordination, not state size.
    m, p = max_parallelism, parallelism
    groups = KeyGroupRange(-(-subtask * m // p), -(-(subtask + 1) * m // p) - 1)
    stream = InlineStateHandle(f"s{subtask}", b"drill")
    return OperatorSubtaskState(keyed=(KeyGroupsStateHandle(groups, (0,) * len(groups), stream),))


@dataclass
class AckDriver:
    addresses: list[str]
    job_id: str = "drill-job"
    interval_ms: int = 300
    parallelism: int = 2
    errors: list[str] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.graph = JobGraph(
            self.job_id,
            (
                OperatorSpec("source", self.parallelism, 128),
                OperatorSpec("count", self.parallelism, 128, keyed=True),
            ),
        )
        self._acks = [
            (op.uid, i, _inline_state(i, op.parallelism, op.max_parallelism))
            if op.keyed
            else (op.uid, i, OperatorSubtaskState())
            for op in self.graph.operators
            for i in range(op.parallelism)
        ]
        # Retry for long: registration may meet a leader election, or a lost quorum.
        # A short request timeout: a frozen leader must not hold the driver up for long.
        self.client = CoordinatorClient(self.addresses, timeout_s=1.0, retry_for_s=120.0)
        self.client.register_job(self.graph, {"interval_ms": self.interval_ms})
        self._thread = threading.Thread(target=self._run, name="drill-driver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                beat = self.client.heartbeat(self.job_id, seq)
            except ClientError as exc:
                self.errors.append(f"heartbeat: {exc}")
                self._stop.wait(0.05)
                continue
            for notice in beat.notifications:
                seq = max(seq, notice.seq)
                self.received.append({**dataclasses.asdict(notice), "receiver": "ack-driver",
                                      "time": time.time()})  # fmt: skip
                if notice.type == "trigger":
                    # A 404/409 means the checkpoint died with the old leader: expected.
                    with contextlib.suppress(ClientError):
                        self.client.acknowledge(self.job_id, notice.checkpoint_id, self._acks)
            self._stop.wait(0.03)

    def finish(self, timeout: float) -> Invariant | None:
        self.abort()
        return None

    def notices(self) -> list[dict[str, Any]]:
        return list(self.received)

    def abort(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None
            self.client.close()


@dataclass
class DriverProcess:
    """A pipeline driver as a process of its own (``python -m <module>``) against the
    replicas: started, killed (SIGKILL, its JVM too), started again. It appends every
    notice it receives to ``notices.jsonl`` and one progress line per epoch to
    ``progress.jsonl`` in ``directory``. Subclasses say which job and how it ends."""

    addresses: list[str]
    directory: Path
    job_id: str = "clicks"
    interval_ms: int = 500
    #: The driver's parallelism; the chaos drill's rescale fault changes it.
    parallelism: int = 2
    #: Where keyed state lives (``--state-backend`` of every driver run); None: its default.
    state_backend: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    #: A warm standby driver beside the active one (``--standby``), when one runs.
    standby_proc: subprocess.Popen[bytes] | None = None

    @property
    def progress(self) -> Path:
        return self.directory / "progress.jsonl"

    @property
    def notice_log(self) -> Path:
        return self.directory / "notices.jsonl"

    def command(self, records_per_split: int) -> list[str]:
        """The driver's command line (``records_per_split``: 0 for an endless stream)."""
        raise NotImplementedError

    def _spawn(self, records_per_split: int, name: str, *extra: str) -> subprocess.Popen[bytes]:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [*self.command(records_per_split),
                   "--coordinator", ",".join(a.removeprefix("http://") for a in self.addresses),
                   "--notices", str(self.notice_log), "--progress", str(self.progress),
                   *extra]  # fmt: skip
        with open(self.directory / f"{name}.log", "ab") as log:
            # Its own session: signals for the driver never reach the drill (and back).
            return subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def reports(self) -> list[dict[str, Any]]:
        with contextlib.suppress(OSError):
            return [json.loads(x) for x in self.progress.read_text().splitlines() if x.strip()]
        return []

    def start(self) -> None:
        self.proc = self._spawn(0, "driver-endless")

    def running(self, runs: int = 1) -> bool:
        return sum(r.get("event") == "started" for r in self.reports()) >= runs

    def kill(self) -> None:
        """SIGKILL the driver (its whole process group: the JVM too), as a crash would."""
        kill_group(self.proc)

    def start_standby(self) -> subprocess.Popen[bytes]:
        """Start a warm standby driver: it registers as the job's standby and waits."""
        self.standby_proc = self._spawn(0, "driver-standby", "--standby")
        return self.standby_proc

    def promote(self) -> None:
        """The standby was granted the job: it is the active driver from now on."""
        self.proc, self.standby_proc = self.standby_proc, None

    def report_of(self, pid: int, event: str) -> dict[str, Any] | None:
        """The first progress line of process ``pid`` with this event."""
        return next((r for r in self.reports() if r.get("pid") == pid
                     and r.get("event") == event), None)  # fmt: skip

    def restart(self, timeout: float, *extra: str) -> bool:
        """Start the endless driver again: it restores from the latest completed
        checkpoint (or from ``--restore-from`` in ``extra``). True once it reports
        started."""
        runs = sum(r.get("event") == "started" for r in self.reports()) + 1
        self.start_again(*extra)
        return wait_started(self, timeout, runs)

    def start_again(self, *extra: str) -> subprocess.Popen[bytes]:
        """Start the endless driver again, cold, without waiting for it."""
        self.proc = self._spawn(0, "driver-endless", *extra)
        return self.proc

    def notices(self) -> list[dict[str, Any]]:
        with contextlib.suppress(OSError):
            lines = self.notice_log.read_text().splitlines()
            out = []
            for line in lines:
                with contextlib.suppress(ValueError):  # a line cut short by a kill
                    n = json.loads(line)
                    out.append({**n, "receiver": f"driver pid {n.get('pid')}"})
            return out
        return []

    def committed_lines(self) -> list[str] | None:
        """The output committed so far, where the drill can read it while the job runs
        (None: it cannot)."""
        return None

    def finish(self, timeout: float) -> Invariant | None:
        raise NotImplementedError

    def abort(self) -> None:
        kill_group(self.standby_proc)
        kill_group(self.proc)


@dataclass
class ClicksPipeline(DriverProcess):
    """The clicks example as a driver process on an endless generated stream.

    At the end of the drill the driver is interrupted (Ctrl-C: output of completed
    checkpoints stays committed, the rest is replayed by the next start), then started
    once more with the stream bounded at the offset the first run reached: it restores
    from the latest completed checkpoint, replays to that bound and takes a last
    checkpoint. Its committed output must then equal the example's ``expected_output``
    of exactly that input — across every failover of the drill and a driver restore.
    """

    splits: int = 2
    users: int = 200
    records_per_epoch: int = 200

    def command(self, records_per_split: int) -> list[str]:
        return [
            sys.executable, "-m", "sparkpoint.examples.run_clicks",
            "--job-id", self.job_id,
            "--checkpoint-dir", str(self.directory / "unused-embedded-checkpoints"),
            "--output", str(self.directory / "out"),
            "--master", "local[1]",
            "--parallelism", str(self.parallelism),
            "--splits", str(self.splits), "--users", str(self.users),
            "--records-per-epoch", str(self.records_per_epoch),
            "--records-per-split", str(records_per_split),
            "--interval-ms", str(self.interval_ms),
            *(("--state-backend", self.state_backend) if self.state_backend else ()),
        ]  # fmt: skip

    def committed_lines(self) -> list[str] | None:
        """Every line of every committed file of the sink (``part-*``; in-progress files
        are elsewhere). Each line of the clicks output is unique — a user's running
        count, a session's start — so a line seen twice was committed twice."""
        lines: list[str] = []
        with contextlib.suppress(FileNotFoundError):
            for part in sorted((self.directory / "out").glob("part-*")):
                with contextlib.suppress(FileNotFoundError):  # a rename in progress
                    lines.extend(part.read_text().splitlines())
        return lines

    def finish(self, timeout: float) -> Invariant | None:
        assert self.proc is not None
        # The standby first: granted the job when the active run releases it, it would
        # go on with the endless stream.
        kill_group(self.standby_proc)
        self.standby_proc = None
        os.kill(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.abort()
            return Invariant("exactly_once_output", False, "driver did not stop on SIGINT")
        epochs = epochs_read(self.reports())
        per_split = self.records_per_epoch // self.splits
        # Past every checkpoint the first run may have completed: Ctrl-C can land after an
        # epoch's checkpoint but before its progress line. Replaying further is harmless —
        # the expected output is computed for exactly this bound.
        bound = (epochs + 3) * per_split
        self.proc = self._spawn(bound, "driver-bounded")
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.abort()
            return Invariant("exactly_once_output", False, "bounded replay did not finish")
        if code != 0:
            last = last_log_line(self, "driver-bounded")
            return Invariant("exactly_once_output", False, f"bounded replay exited {code} ({last})")
        return self._verdict(bound)

    def _verdict(self, bound: int) -> Invariant:
        # The input the job read is what its committed output says, when that is more than
        # the reports give: a driver killed between a checkpoint and its progress line read
        # more than it reported — over many kills more than any margin — and the bounded
        # replay then restores past ``bound`` and reads nothing more.
        bound = max(bound, clicks_read_per_split(self.committed_lines() or [], self.splits))
        # The offline expected output comes from the pipeline's own function, computed in a
        # separate interpreter: the drill process never imports the PySpark runtime.
        command = [
            sys.executable, "-m", "sparkpoint.ops.drills.clicks_output",
            "--output", str(self.directory / "out"), "--splits", str(self.splits),
            "--users", str(self.users), "--records-per-epoch", str(self.records_per_epoch),
            "--records-per-split", str(bound),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
        if done.returncode != 0:
            return Invariant("exactly_once_output", False, done.stderr[-500:])
        found = json.loads(done.stdout)
        verdict = check_exactly_once(found["committed"], found["expected"])
        return Invariant(verdict.name, verdict.ok, f"{verdict.detail} (input: {bound} per split)")


def last_log_line(driver: DriverProcess, name: str) -> str:
    """The last line of the driver's log ``<name>.log``, and where it is."""
    log = driver.directory / f"{name}.log"
    last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    return f"{log}: {' '.join(last)[-300:]}"


def kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def epochs_read(reports: list[dict[str, Any]]) -> int:
    """An upper bound on the epochs of input read over every run of the driver: a run
    restarted after a kill counts its epochs from 0 again, from the offsets of the
    checkpoint it restored (itself no further than the previous run read)."""
    total = run_max = 0
    for r in reports:
        if r.get("event") == "started":
            total += run_max
            run_max = 0
        run_max = max(run_max, int(r.get("epoch", 0)))
    return total + run_max


def wait_started(pipeline: DriverProcess, timeout: float, runs: int = 1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pipeline.running(runs):
            return True
        if pipeline.proc is not None and pipeline.proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False
