"""Background JVM daemons the launchers start (ZooKeeper, HDFS, Kafka): spawn one detached,
tell whether it still runs — also from another command that only knows its pid — and
stop it with a signal, then SIGKILL; and the launcher state that lets a later command
find them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self


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


STATE_FILE = "launcher.json"


class Launcher:
    """A launcher of daemons whose state is kept in ``launcher.json`` under its directory,
    so that a later command (``status``, ``stop``) finds the processes it started.
    Subclasses say what the state is (:meth:`_state`) and how to take it back
    (:meth:`_restore`: only what stopping and status need)."""

    what: ClassVar[str]
    error: ClassVar[type[Exception]]
    _procs: dict[Any, subprocess.Popen[bytes]]

    base_dir: Path

    @property
    def home(self) -> Path:
        """The directory of the launcher's state (and of its daemons' files)."""
        return self.base_dir

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _restore(self, home: Path, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _save_state(self) -> None:
        (self.home / STATE_FILE).write_text(json.dumps(self._state(), indent=2))

    @classmethod
    def attach(cls, directory: str | Path) -> Self:
        """The launcher whose state lives in ``directory`` (started earlier, maybe elsewhere)."""
        home, state = read_state(directory, STATE_FILE, cls.what, cls.error)
        launcher = cls.__new__(cls)
        launcher._procs = {}
        launcher._restore(home, state)
        return launcher

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
