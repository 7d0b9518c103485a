"""Contender processes for failover tests: real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ContenderProcess:
    name: str
    status_path: Path
    proc: subprocess.Popen[bytes]
    log_path: Path
    stopped: bool = field(default=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def status(self) -> dict[str, Any]:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def issued(self) -> list[tuple[int, int]]:
        """(epoch, id) of every checkpoint id this process handed out."""
        path = Path(f"{self.status_path}.ids")
        if not path.exists():
            return []
        return [tuple(map(int, line.split())) for line in path.read_text().splitlines() if line]  # type: ignore[misc]

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(10)


def spawn_contender(
    directory: Path,
    name: str,
    *,
    quorum: str,
    cluster_id: str,
    session_timeout: float,
    renew_interval: float = 0.1,
    job: str | None = None,
    work_interval: float = 0.05,
    takeover_timeout: float = 0.0,
    prefix: list[str] | None = None,
) -> ContenderProcess:
    directory.mkdir(parents=True, exist_ok=True)
    status = directory / f"{name}.json"
    log_path = directory / f"{name}.log"
    command = [
        sys.executable, "-m", "tests.support.contender",
        "--quorum", quorum, "--cluster-id", cluster_id, "--instance-id", name,
        "--session-timeout", str(session_timeout), "--renew-interval", str(renew_interval),
        "--status", str(status), "--work-interval", str(work_interval),
    ]  # fmt: skip
    command += ["--takeover-timeout", str(takeover_timeout)]
    if job:
        command += ["--job", job]
    command = [*(prefix or []), *command]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return ContenderProcess(name, status, proc, log_path)
