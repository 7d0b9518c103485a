"""Background JVM daemons the launchers start (ZooKeeper, HDFS): spawn one detached,
tell whether it still runs — also from another command that only knows its pid — and
stop it with a signal, then SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def spawn_detached(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own (it survives the launching command and
    its Ctrl-C), stdout and stderr appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def running(pid: int | None, proc: subprocess.Popen[bytes] | None, main_class: str) -> bool:
    """Whether the daemon runs: by its Popen when this process started it, else by its
    pid, which must still run ``main_class`` (a pid reused by another program is not it)."""
    if pid is None:
        return False
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    return not cmdline.exists() or main_class.encode() in cmdline.read_bytes()


def stop(pid: int, sig: int, timeout: float, alive: Callable[[], bool]) -> None:
    """Send ``sig``; SIGKILL if it still runs after ``timeout``; wait until it is gone."""
    for attempt in (sig, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, attempt)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not alive():
                return
            time.sleep(0.05)  # polling a process that is exiting


def read_state(
    base_dir: str | Path, file_name: str, what: str, error: type[Exception]
) -> tuple[Path, dict[str, Any]]:
    """The launcher state a start left in ``base_dir`` (its resolved path, and the state);
    ``error`` saying that no ``what`` was started there when there is none."""
    path = Path(base_dir).resolve() / file_name
    try:
        return path.parent, json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise error(f"no {what} was started from {base_dir}: {exc}") from exc
