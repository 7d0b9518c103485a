"""`sparkpoint demo`: the whole system on this machine, started by one command.

A local ZooKeeper, two coordinator replicas (`sparkpoint coordinator run`, leader election
with fencing and leases), and a Spark local-mode pipeline — per-user running totals and
sessions over generated click events, written exactly once to files — checkpointing every
few seconds to the local disk. With ``--kill-leader-every`` the leading coordinator is
killed on schedule and restarted as a follower: the pipeline keeps running, the other
replica takes over by lease, and checkpoint ids keep rising.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.config import StoreSettings, ZooKeeperSettings
from sparkpoint.ha import HAError, ZooKeeperConnection, list_contenders, read_leader
from sparkpoint.ops.demo.addresses import addresses_event
from sparkpoint.ops.demo.connectors import QueueDemo
from sparkpoint.ops.demo.kafka import KafkaDemo
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.ops.drills.kill_driver import standby_ready
from sparkpoint.ops.drills.replicas import LocalReplica, ReplicaSettings

CLUSTER = "demo"
JOB = "clicks"
#: The job of the connector demos (the orders example).
ORDERS_JOB = "orders"
#: Checkpoints each job keeps: a path copied from `checkpoints list` outlives a few more.
RETAINED = 3


@dataclass
class DemoOptions:
    directory: Path
    replicas: int = 2
    session_timeout_s: float = 10.0
    takeover_timeout_s: float = 1.5
    checkpoint_interval_s: float = 3.0
    parallelism: int = 4
    records_per_epoch: int = 2000
    kill_leader_every_s: float | None = None
    kill_signal: int = signal.SIGKILL
    #: A warm standby driver beside the active one; a new one follows every takeover.
    standby_driver: bool = False
    #: Kill -9 the active driver (with its JVM) every so often (needs ``standby_driver``).
    kill_driver_every_s: float | None = None
    duration_s: float | None = None
    source: str = "generator"  # or "rabbitmq" (with sink "postgres"), "kafka" (sink "kafka")
    sink: str = "files"
    drain_timeout_s: float = 300.0
    #: A checkpoint directory URI (HDFS) instead of <directory>/checkpoints.
    checkpoint_root: str | None = None


@dataclass
class Progress:
    """What the pipeline reported last (one JSON line per epoch)."""

    epoch: int = 0
    records: int = 0
    last_completed: int | None = None
    restored_from: Any = None
    records_per_s: float = 0.0
    finished: bool = False


@dataclass
class Demo:
    options: DemoOptions
    emit: Callable[[dict[str, Any]], None]
    zk: LocalZooKeeper | None = None
    replicas: list[LocalReplica] = field(default_factory=list)
    pipeline: subprocess.Popen[bytes] | None = None
    standby: subprocess.Popen[bytes] | None = None
    observer: ZooKeeperConnection | None = None
    progress: Progress = field(default_factory=Progress)
    leader: tuple[str, int] | None = None
    failovers: list[dict[str, Any]] = field(default_factory=list)
    driver_takeovers: list[dict[str, Any]] = field(default_factory=list)
    queue: QueueDemo | KafkaDemo | None = None
    _driver_killed_at: float | None = None
    _next_driver_kill: float = float("inf")
    _active_started: bool = False
    #: The checkpoint the last takeover restored (a new standby waits for a newer one).
    _taken_over_from: int | None = None
    _progress_offset: int = 0
    _rate: list[tuple[float, int]] = field(default_factory=list)

    # --- paths ------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return JOB if self.options.source == "generator" else ORDERS_JOB

    @property
    def checkpoint_dir(self) -> str:
        return self.options.checkpoint_root or str(self.options.directory / "checkpoints")

    @property
    def output_dir(self) -> Path:
        return self.options.directory / "output"

    @property
    def progress_file(self) -> Path:
        return self.options.directory / "progress.jsonl"

    @property
    def logs(self) -> Path:
        return self.options.directory / "logs"

    # --- run --------------------------------------------------------------------------

    def run(self, render: Callable[[Demo], None] | None = None) -> None:
        opts = self.options
        self.logs.mkdir(parents=True, exist_ok=True)
        self.zk = LocalZooKeeper(opts.directory / "zookeeper", tick_time_ms=500)
        self.zk.start()
        self.emit(
            {"event": "zookeeper", "connect_string": self.zk.connect_string, "rest_auth": "off"}
        )
        self.observer = ZooKeeperConnection(
            ZooKeeperSettings(
                quorum=self.zk.connect_string, cluster_id=CLUSTER, takeover_timeout_s=0.0
            )
        ).start()
        settings = ReplicaSettings(
            session_timeout_s=opts.session_timeout_s,
            renew_interval_s=0.25,
            takeover_timeout_s=opts.takeover_timeout_s,
            num_retained=RETAINED,
            # The product's grace period, and so its checkpoint timeout (which may not
            # exceed it): the demo shows no orphan collection, and a loaded laptop's
            # checkpoints may take longer than a drill's few seconds.
            orphan_grace_s=StoreSettings().orphan_grace_s,
            orphan_scan_interval_s=StoreSettings().orphan_scan_interval_s,
        )
        for i in range(opts.replicas):
            replica = LocalReplica(
                f"coordinator-{i + 1}", self.logs, self.zk.connect_string, CLUSTER,
                self.checkpoint_dir, str(opts.directory / "savepoints"), settings,
            )  # fmt: skip
            self.replicas.append(replica.start())
        self._announce_addresses()
        if opts.source in ("rabbitmq", "kafka"):
            self.queue = (
                KafkaDemo(opts.directory) if opts.source == "kafka" else QueueDemo(opts.directory)
            )
            self.queue.start_servers()
            self.emit({"event": "connectors", **self.queue.addresses()})
        self._start_pipeline()
        if self.queue is not None:
            self.queue.start_publisher()
        started = time.monotonic()
        next_kill = started + (opts.kill_leader_every_s or float("inf"))
        self._next_driver_kill = started + (opts.kill_driver_every_s or float("inf"))
        killed_at: float | None = None
        while opts.duration_s is None or time.monotonic() - started < opts.duration_s:
            self._read_progress()
            self._tend_standby()
            current, killed_at = self._watch_leader(killed_at)
            if current and time.monotonic() >= next_kill:
                killed_at = time.monotonic()
                self._kill(current[0])
                next_kill = killed_at + (opts.kill_leader_every_s or float("inf"))
            for replica in self.replicas:
                if not replica.alive():
                    replica.start()  # back as a follower
            if self.pipeline is not None and self.pipeline.poll() is not None:
                self.emit({"event": "pipeline-exited", "code": self.pipeline.returncode})
                break
            if render is not None:
                render(self)
            time.sleep(0.25)
        self._read_progress()

    def _announce_addresses(self) -> None:
        """Say where everything is as soon as a leader is elected (or after a while
        without one): the UI and REST addresses, ZooKeeper, the cluster id, and a line
        that points the CLI at the demo."""
        assert self.zk is not None
        deadline = time.monotonic() + 60
        while self._current_leader() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # a poll interval; the deadline ends the wait
        self.emit(addresses_event(self.zk.connect_string, CLUSTER, self.replicas))

    def _watch_leader(self, killed_at: float | None) -> tuple[tuple[str, int] | None, float | None]:
        """Emit a leader change (with the handover time after a kill by the demo). Every
        change after the first leader is a failover, whoever caused it. Returns the
        current leader, and the kill time while its handover is still awaited."""
        current = self._current_leader()
        if current and current != self.leader:
            # "epoch": the old name of "term", kept for one release
            event: dict[str, Any] = {"event": "leader", "leader": current[0],
                                     "term": current[1], "epoch": current[1]}  # fmt: skip
            if self.leader is not None:
                event["previous_leader"], event["previous_term"] = self.leader
                if killed_at is not None:
                    event["handover_s"] = round(time.monotonic() - killed_at, 2)
                self.failovers.append(event)
            killed_at = None
            self.emit(event)
            self.leader = current
        return current, killed_at

    def _tend_standby(self) -> None:
        """Keep a standby driver waiting; kill the active one on schedule once it does."""
        opts = self.options
        if not opts.standby_driver or self._driver_killed_at is not None:
            return
        if not self._active_started:
            return  # registered before the active run, a standby would become the active one
        if self._taken_over_from is not None and (self.progress.last_completed or 0) <= (
            self._taken_over_from
        ):
            return  # a starting JVM would slow the new driver's first checkpoint
        if self.standby is None or self.standby.poll() is not None:
            self._start_pipeline(standby=True)
        elif time.monotonic() >= self._next_driver_kill and self.standby_ready():
            self._kill_driver()
            self._next_driver_kill = time.monotonic() + (opts.kill_driver_every_s or 0)

    def _start_pipeline(self, *, standby: bool = False) -> None:
        opts = self.options
        common = [
            "--job-id", self.job_id,
            "--checkpoint-dir", str(self.checkpoint_dir),
            "--savepoint-dir", str(opts.directory / "savepoints"),
            "--progress", str(self.progress_file),
            "--coordinator", ",".join(r.host_port for r in self.replicas),
            "--parallelism", str(opts.parallelism),
            "--interval-ms", str(int(opts.checkpoint_interval_s * 1000)),
        ]  # fmt: skip
        if self.queue is not None:
            command = [sys.executable, "-m", *self.queue.pipeline_args(), *common]
        else:
            command = [
                sys.executable, "-m", "sparkpoint.examples.run_clicks",
                "--output", str(self.output_dir), *common,
                "--records-per-epoch", str(opts.records_per_epoch),
                "--records-per-split", "0",  # endless: runs until stopped
            ]  # fmt: skip
        if standby:
            command.append("--standby")
        with open(self.logs / "pipeline.log", "ab") as log:
            proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        if standby:
            self.standby = proc
        else:
            self.pipeline = proc
        self.emit(
            {"event": "standby" if standby else "pipeline", "pid": proc.pid, "job": self.job_id}
        )

    def standby_ready(self) -> bool:
        """The leader has the standby heartbeating: a takeover would find it warm."""
        return standby_ready([r.address for r in self.replicas], self.job_id)

    def _kill_driver(self) -> None:
        """SIGKILL the active driver's process group (Python and its JVM), as a crash
        would; the standby becomes the driver the demo watches."""
        assert self.pipeline is not None and self.standby is not None
        victim = self.pipeline.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(victim, signal.SIGKILL)
        self.pipeline.wait(30)
        self._driver_killed_at = time.monotonic()
        self.pipeline, self.standby = self.standby, None
        self.emit({"event": "driver-killed", "pid": victim})

    def _current_leader(self) -> tuple[str, int] | None:
        if self.observer is None:
            return None
        try:
            info = read_leader(self.observer)
        except HAError:
            return None
        return (info.instance_id, info.epoch) if info else None

    def contenders(self) -> list[str]:
        if self.observer is None:
            return []
        with contextlib.suppress(HAError):
            return [c.instance_id for c in list_contenders(self.observer)]
        return []

    def _kill(self, name: str) -> None:
        for replica in self.replicas:
            if replica.name == name and replica.alive():
                assert replica.proc is not None
                replica.proc.send_signal(self.options.kill_signal)
                if self.options.kill_signal == signal.SIGSTOP:
                    time.sleep(self.options.takeover_timeout_s * 2)  # the pause is the point
                    replica.proc.send_signal(signal.SIGCONT)
                else:
                    replica.proc.wait(30)
                self.emit({"event": "killed", "coordinator": name,
                           "signal": signal.Signals(self.options.kill_signal).name})  # fmt: skip

    def _read_progress(self) -> None:
        try:
            with self.progress_file.open("rb") as f:
                f.seek(self._progress_offset)
                chunk = f.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._progress_offset += len(complete)
        for line in complete.splitlines():
            with contextlib.suppress(ValueError):
                self._apply(json.loads(line))

    def _apply(self, line: dict[str, Any]) -> None:
        if self.pipeline is not None and line.get("pid") not in (None, self.pipeline.pid):
            return  # a standby waiting, or a driver already replaced
        if line.get("event") == "standby":
            return
        if line.get("event") == "started":
            self._active_started = True
        if self._driver_killed_at is not None and line.get("event") == "started":
            took = round(time.monotonic() - self._driver_killed_at, 2)
            event = {"event": "driver-takeover", "pid": line.get("pid"), "takeover_s": took,
                     "restored_from": line.get("restored_from")}  # fmt: skip
            self.driver_takeovers.append(event)
            self.emit(event)
            self._driver_killed_at = None
            self._taken_over_from = int(line.get("restored_from") or 0)
            self._rate = []  # the new driver counts its records from 0
        p = self.progress
        previous = p.last_completed
        p.epoch = int(line.get("epoch") or p.epoch)
        p.records = int(line.get("records") or p.records)
        p.last_completed = line.get("last_completed", p.last_completed)
        p.restored_from = line.get("restored_from", p.restored_from)
        p.finished = p.finished or line.get("event") in {"finished", "interrupted"}
        self._rate.append((float(line.get("time", time.time())), p.records))
        self._rate = self._rate[-20:]
        if len(self._rate) >= 2 and self._rate[-1][0] > self._rate[0][0]:
            (t0, r0), (t1, r1) = self._rate[0], self._rate[-1]
            p.records_per_s = (r1 - r0) / (t1 - t0)
        if p.last_completed is not None and p.last_completed != previous:
            leader = self.leader[0] if self.leader else None
            self.emit({"event": "checkpoint", "checkpoint_id": p.last_completed,
                       "epoch": p.epoch, "leader": leader})  # fmt: skip

    # --- stop -------------------------------------------------------------------------

    def stop(self) -> None:
        if self.standby is not None and self.standby.poll() is None:
            # The standby first: the active driver's clean stop releases the job to it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.standby.pid, signal.SIGKILL)
            self.standby.wait(30)
        if self.queue is not None:
            self._drain()
        if self.pipeline is not None and self.pipeline.poll() is None:
            # SIGINT to the driver alone: it stops at an epoch boundary, committed output
            # stays. Its process group also holds the Python workers of running tasks,
            # which die on SIGINT and would fail the epoch the driver is finishing.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pipeline.pid, signal.SIGINT)
            try:
                self.pipeline.wait(60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pipeline.pid, signal.SIGKILL)
                self.pipeline.wait(30)
        for replica in self.replicas:
            if replica.alive():
                assert replica.proc is not None
                replica.proc.send_signal(signal.SIGCONT)
                replica.proc.terminate()
                replica.stopped = True
        for replica in self.replicas:
            if replica.proc is not None:
                try:
                    replica.proc.wait(30)
                except subprocess.TimeoutExpired:
                    replica.proc.kill()
        self._read_progress()
        if self.queue is not None:
            self.queue.verify()
            self.queue.close()
        if self.observer is not None:
            self.observer.close()
        if self.zk is not None:
            self.zk.stop()

    def _drain(self) -> None:
        """Stop publishing and let the pipeline commit what was published."""
        assert self.queue is not None
        self.queue.stop_publisher()
        self.emit({"event": "draining", "published": self.queue.published})
        deadline = time.monotonic() + self.options.drain_timeout_s
        while time.monotonic() < deadline and not self.queue.drained():
            if self.pipeline is None or self.pipeline.poll() is not None:
                break
            time.sleep(0.5)  # a polling interval: rows arrive with completed checkpoints
        # One more checkpoint interval, so a late duplicate would show up in the check.
        end = time.monotonic() + 2 * self.options.checkpoint_interval_s
        while time.monotonic() < end and self.pipeline is not None and self.pipeline.poll() is None:
            time.sleep(0.5)

    def state_read_command(self) -> str:
        """The command that prints the keyed state (per user, per order key) of the job's
        newest checkpoint."""
        job_dir = f"{self.checkpoint_dir.rstrip('/')}/{self.job_id}"
        return shlex.join(["sparkpoint", "state", "read", job_dir])

    def summary(self) -> dict[str, Any]:
        committed = sorted(self.output_dir.glob("**/part-*")) if self.output_dir.exists() else []
        return {
            "epochs": self.progress.epoch,
            "records": self.progress.records,
            "last_completed_checkpoint": self.progress.last_completed,
            "failovers": self.failovers,
            "zookeeper": self.zk.connect_string if self.zk is not None else None,
            "cluster_id": CLUSTER,
            "coordinators": [r.address for r in self.replicas],
            **({"driver_takeovers": self.driver_takeovers} if self.options.standby_driver else {}),
            "committed_files": len(committed),
            "output": str(self.output_dir),
            "checkpoints": str(self.checkpoint_dir),
            "state_read": self.state_read_command(),
            "logs": str(self.logs),
            **({"verification": self.queue.verification} if self.queue is not None else {}),
        }
