"""`sparkpoint demo`: everything that has landed, running on this machine.

A local ZooKeeper, three contender processes that elect a leader and, while leading,
issue checkpoint ids from a job's ZooKeeper counter — and, with ``--kill-leader-every``,
the leader killed on a schedule so you can watch the handover: a new leader with a higher
fencing epoch, ids that keep rising and are never reused.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.ha import ZooKeeperConnection, read_leader
from sparkpoint.ops.zookeeper import LocalZooKeeper

JOB = "demo-job"


@dataclass
class DemoContender:
    name: str
    directory: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def status_path(self) -> Path:
        return self.directory / f"{self.name}.json"

    def status(self) -> dict[str, Any]:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def issued(self) -> list[int]:
        path = Path(f"{self.status_path}.ids")
        with contextlib.suppress(OSError):
            return [int(line.split()[1]) for line in path.read_text().splitlines() if line]
        return []

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class DemoOptions:
    directory: Path
    contenders: int = 3
    session_timeout_s: float = 10.0
    takeover_timeout_s: float = 1.5
    kill_leader_every_s: float | None = None
    kill_signal: int = signal.SIGKILL
    duration_s: float | None = None


@dataclass
class Demo:
    options: DemoOptions
    emit: Callable[[dict[str, Any]], None]
    zk: LocalZooKeeper | None = None
    contenders: list[DemoContender] = field(default_factory=list)
    observer: ZooKeeperConnection | None = None

    def run(self, render: Callable[[Demo], None] | None = None) -> None:
        opts = self.options
        opts.directory.mkdir(parents=True, exist_ok=True)
        self.zk = LocalZooKeeper(opts.directory / "zookeeper", tick_time_ms=500)
        self.zk.start()
        self.emit({"event": "zookeeper", "connect_string": self.zk.connect_string})
        self.observer = ZooKeeperConnection(
            ZooKeeperSettings(quorum=self.zk.connect_string, cluster_id="demo")
        ).start()
        for i in range(opts.contenders):
            contender = DemoContender(f"coordinator-{i + 1}", opts.directory / "contenders")
            contender.directory.mkdir(parents=True, exist_ok=True)
            self._spawn(contender)
            self.contenders.append(contender)
        started = time.monotonic()
        next_kill = started + (opts.kill_leader_every_s or float("inf"))
        last_leader: tuple[str, int] | None = None
        killed_at: float | None = None
        while opts.duration_s is None or time.monotonic() - started < opts.duration_s:
            info = read_leader(self.observer)
            current = (info.instance_id, info.epoch) if info else None
            if current and current != last_leader:
                event: dict[str, Any] = {
                    "event": "leader",
                    "leader": current[0],
                    "epoch": current[1],
                }
                if killed_at is not None:
                    event["handover_s"] = round(time.monotonic() - killed_at, 2)
                    killed_at = None
                self.emit(event)
                last_leader = current
            if time.monotonic() >= next_kill and current:
                killed_at = time.monotonic()
                self._kill(current[0])
                next_kill = killed_at + (opts.kill_leader_every_s or float("inf"))
            for contender in self.contenders:
                if not contender.alive():
                    self._spawn(contender)  # the killed replica comes back as a follower
            if render is not None:
                render(self)
            time.sleep(0.2)

    def _spawn(self, contender: DemoContender) -> None:
        assert self.zk is not None
        log = open(contender.directory / f"{contender.name}.log", "ab")  # noqa: SIM115
        command = [sys.executable, "-m", "sparkpoint.ops.contender"]
        command += ["--quorum", self.zk.connect_string, "--cluster-id", "demo"]
        command += ["--instance-id", contender.name, "--job", JOB, "--work-interval", "0.5"]
        command += ["--session-timeout", str(self.options.session_timeout_s)]
        command += ["--renew-interval", "0.25", "--status", str(contender.status_path)]
        command += ["--takeover-timeout", str(self.options.takeover_timeout_s)]
        contender.proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the demo, which stops them in order
        )
        log.close()

    def _kill(self, name: str) -> None:
        for contender in self.contenders:
            if contender.name == name and contender.alive():
                assert contender.proc is not None
                contender.proc.send_signal(self.options.kill_signal)
                contender.proc.wait(10)
                self.emit({"event": "killed", "contender": name,
                           "signal": signal.Signals(self.options.kill_signal).name})  # fmt: skip

    def summary(self) -> dict[str, Any]:
        ids = [i for c in self.contenders for i in c.issued()]
        return {
            "checkpoint_ids_issued": len(ids),
            "distinct": len(set(ids)),
            "highest": max(ids, default=0),
            "directory": str(self.options.directory),
        }

    def stop(self) -> None:
        for contender in self.contenders:
            if contender.alive():
                assert contender.proc is not None
                contender.proc.terminate()
        for contender in self.contenders:
            if contender.proc is not None:
                try:
                    contender.proc.wait(15)
                except subprocess.TimeoutExpired:
                    contender.proc.kill()
        if self.observer is not None:
            self.observer.close()
        if self.zk is not None:
            self.zk.stop()
