"""The RocksDB state backend's store servers (state/rocksdb/server.py) that processes of
this test session started: found by an environment variable the session sets, which
every process it starts inherits (Spark's JVM, its Python workers, the servers they
start), so other sessions on the machine are left alone. As a plugin
(``pytest_plugins``) it marks the session and, at its end, stops the servers of drivers
that never closed (a test's driver process killed, a simulated crash): a server would
otherwise wait out its idle time."""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.pipeline.state.rocksdb.client import stop_server

SESSION_VARIABLE = "SPARKPOINT_TEST_SESSION"
SERVER_MODULE = "sparkpoint.pipeline.state.rocksdb.server"


def mark_session() -> str:
    """Set (once) the variable that marks this session's processes. A parallel worker
    (pytest-xdist) inherits the controller's mark and adds its own name to it: its
    session ends while the other workers' drivers still use their servers."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    mark = os.environ.get(SESSION_VARIABLE) or secrets.token_hex(8)
    if worker and not mark.endswith(f"-{worker}"):
        mark = f"{mark}-{worker}"
    os.environ[SESSION_VARIABLE] = mark
    return mark


@dataclass(frozen=True, slots=True)
class RunningServer:
    pid: int
    directory: Path


def running_servers(directory: Path | None = None) -> list[RunningServer]:
    """This session's store servers still running (of ``directory`` only, if given)."""
    marker = f"{SESSION_VARIABLE}={os.environ.get(SESSION_VARIABLE, '')}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            module = SERVER_MODULE.encode()
            if module not in argv or marker not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            server_dir = Path(argv[argv.index(module) + 1].decode())
            if directory is None or server_dir == directory:
                found.append(RunningServer(int(proc.name), server_dir))
    return found


def stop_all() -> list[RunningServer]:
    """Stop this session's servers (a test whose driver was not closed leaves its own);
    returns those that were running."""
    left = running_servers()
    for server in left:
        stop_server(server.directory)
    return left


# -- the plugin ----------------------------------------------------------------------------

mark_session()  # at import: before any Spark or driver process of the session starts


def pytest_sessionfinish(session: object) -> None:
    stop_all()
