"""A real RabbitMQ broker and a real PostgreSQL server on this machine, in a directory of
their own on free ports: for the connector tests, the demo and the benchmark.

Both come from the Debian packages (``rabbitmq-server``, ``postgresql``); their system
services are never used. RabbitMQ gets its own node name, ports, data and log
directories, Erlang cookie (``HOME``) and port mapper (``epmd`` on a free port, so the
machine's default one is not touched). PostgreSQL refuses to run as root, so as root its
files belong to the ``postgres`` user and its commands run through ``runuser``; it
listens on 127.0.0.1 and a unix socket in its directory, with prepared transactions on.
A restart keeps the data (durable queues, persistent messages, committed rows).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path


class ServerError(RuntimeError):
    """A local server could not be found, started or stopped."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(
    port: int,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes],
    ready: Callable[[socket.socket], bool] | None = None,
) -> None:
    """Wait until ``port`` accepts connections (and, with ``ready``, until the server on it
    answers as ``ready`` judges a connected socket)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"{what} exited with {proc.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                if ready is None or ready(sock):
                    return
        except OSError:
            pass
        time.sleep(0.1)  # polling a server that is not serving yet
    raise ServerError(f"{what} did not serve on port {port} within {timeout:g} s")


def _amqp_greets(sock: socket.socket) -> bool:
    """True when the broker answers AMQP 0-9-1's protocol header with a method frame
    (``connection.start``). A booting broker may listen and still reset the connection,
    or answer nothing: only this reply says a client can connect now."""
    sock.sendall(b"AMQP\x00\x00\x09\x01")
    return sock.recv(1) == b"\x01"


class RabbitMQServer:
    """``start()``/``stop()``/``restart()``; ``url`` is the AMQP URL (guest/guest, which
    RabbitMQ allows from localhost)."""

    BIN = "/usr/lib/rabbitmq/bin/rabbitmq-server"

    def __init__(self, directory: Path, *, port: int | None = None) -> None:
        if not Path(self.BIN).exists():
            raise ServerError(
                f"{self.BIN} not found: install the Debian package with "
                "apt-get install -y rabbitmq-server (scripts/bootstrap.sh does)"
            )
        self.directory = directory
        self.port = port or free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = f"sp{uuid.uuid4().hex[:8]}@localhost"
        self._proc: subprocess.Popen[bytes] | None = None
        self._epmd: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F?heartbeat=30"

    def _env(self) -> dict[str, str]:
        d = self.directory
        return {
            **os.environ,
            "HOME": str(d),  # the Erlang cookie lives here
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq"),  # none there: defaults
        }

    def start(self, timeout: float = 120.0) -> RabbitMQServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "enabled_plugins").write_text("[].\n")
        env = self._env()
        if self._epmd is None or self._epmd.poll() is not None:
            epmd = shutil.which("epmd") or "/usr/bin/epmd"
            self._epmd = subprocess.Popen(
                [epmd, "-port", str(self.epmd_port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        log = (self.directory / "server.log").open("ab")
        self._proc = subprocess.Popen(
            [self.BIN], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        what = f"rabbitmq-server (log {self.directory}/server.log)"
        _wait_port(self.port, timeout, what, self._proc, _amqp_greets)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> None:
        """Stop the broker (SIGTERM: a clean shutdown; SIGKILL: a crash)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def restart(self, sig: int = signal.SIGTERM) -> None:
        self.stop(sig)
        self.start()

    def close(self) -> None:
        self.stop()
        if self._epmd is not None:
            self._epmd.kill()
            self._epmd.wait(10)
            self._epmd = None


def _postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not found:
        raise ServerError(
            "PostgreSQL's pg_ctl not found under /usr/lib/postgresql: install the Debian "
            "package with apt-get install -y postgresql (scripts/bootstrap.sh does)"
        )
    return Path(found[-1]).parent


class PostgresServer:
    """``conninfo`` connects as the ``postgres`` superuser to database ``postgres``."""

    def __init__(self, directory: Path, *, port: int | None = None) -> None:
        self.bin = _postgres_bin()
        self.directory = directory
        self.port = port or free_port()
        self.data = directory / "data"
        self.socket_dir = directory / "socket"
        self._as_root = os.geteuid() == 0

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres connect_timeout=5"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, check=False)
        if check and result.returncode != 0:
            raise ServerError(
                f"{args[0]} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).decode(errors='replace')[-2000:]}"
            )
        return result

    def start(self, timeout: float = 120.0) -> PostgresServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if self._as_root:
            shutil.chown(self.directory, "postgres", "postgres")
            shutil.chown(self.socket_dir, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        options = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
            "-c max_prepared_transactions=64 -c fsync=on -c max_connections=50"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.directory / "server.log"),
            "-o", options, "-w", "-t", str(int(timeout)), "start",
        )  # fmt: skip
        return self

    def stop(self, mode: str = "fast") -> None:
        """``fast``: a clean shutdown; ``immediate``: like a crash (recovery at start)."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def close(self) -> None:
        self.stop("immediate")
