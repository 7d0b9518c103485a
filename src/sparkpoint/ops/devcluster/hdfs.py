"""Start and stop a real HDFS on this machine: one NameNode and N DataNodes.

Each daemon is a JVM started from Hadoop's own main class
(``org.apache.hadoop.hdfs.server.namenode.NameNode``, formatted first, and
``org.apache.hadoop.hdfs.server.datanode.DataNode``) with the jars of the ``hadoop``
artifact set (:mod:`sparkpoint.ops.devcluster.jvm`), a generated configuration under
``base_dir`` and free loopback ports; WebHDFS and permissions are on. Used by
``sparkpoint hdfs …``, the demo and drills with ``--storage hdfs``, and the test suite.

>>> with LocalHdfs("/tmp/hdfs", datanodes=3) as cluster:   # doctest: +SKIP
...     print(cluster.webhdfs_uri)                            # webhdfs://127.0.0.1:PORT
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sparkpoint.ops.devcluster import daemons, jvm
from sparkpoint.ops.devcluster.hdfs_config import (
    JAVA17_OPENS,
    cluster_properties,
    datanode_counters,
    namenode_report,
    write_conf_dir,
)

NAMENODE_MAIN = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_MAIN = "org.apache.hadoop.hdfs.server.datanode.DataNode"
FS_SHELL_MAIN = "org.apache.hadoop.fs.FsShell"
DFS_ADMIN_MAIN = "org.apache.hadoop.hdfs.tools.DFSAdmin"
DEFAULT_BLOCK_SIZE = 128 * 1024 * 1024
_PORT_ATTEMPTS = 3


class HdfsLaunchError(RuntimeError):
    """A daemon could not be started, or the cluster did not become ready in time."""


@dataclass
class Daemon:
    """One JVM: ``name`` is ``namenode`` or ``datanode-N``; ports are on ``host``."""

    name: str
    http_port: int
    rpc_port: int  # NameNode: client RPC; DataNode: block transfer (data) port
    ipc_port: int = 0  # DataNode only
    pid: int | None = None


class LocalHdfs(daemons.Launcher):
    """A NameNode and ``datanodes`` DataNodes on loopback, their files in ``base_dir``."""

    what = "HDFS"
    error = HdfsLaunchError

    def __init__(
        self,
        base_dir: str | Path,
        *,
        datanodes: int = 3,
        replication: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        host: str = "127.0.0.1",
        heap_mb: int = 256,
        quick_jit: bool = True,
    ) -> None:
        if datanodes < 1:
            raise HdfsLaunchError(f"at least one DataNode is needed, not {datanodes}")
        replication = min(3, datanodes) if replication is None else replication
        if not 1 <= replication <= datanodes:
            raise HdfsLaunchError(
                f"replication {replication} needs 1..{datanodes} DataNodes (have {datanodes})"
            )
        if block_size <= 0 or block_size % 512:
            raise HdfsLaunchError(f"block size {block_size} is not a positive multiple of 512")
        self.base_dir = Path(base_dir).resolve()
        self.host = host
        self.replication = replication
        self.block_size = block_size
        self.heap_mb = heap_mb
        # C1 only starts a daemon faster (tests, the demo); a benchmark wants C2's
        # throughput (checksums on every packet).
        self.quick_jit = quick_jit
        self.superuser = getpass.getuser()  # HDFS' superuser is whoever runs the NameNode
        self.namenode = Daemon("namenode", 0, 0)
        self.datanodes = [Daemon(f"datanode-{i + 1}", 0, 0, 0) for i in range(datanodes)]
        self._pick_ports()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def _pick_ports(self) -> None:
        # All sockets stay bound until every port is picked: no two daemons get one port.
        with contextlib.ExitStack() as stack:
            socks = [
                stack.enter_context(socket.socket()) for _ in range(2 + 3 * len(self.datanodes))
            ]
            for sock in socks:
                sock.bind((self.host, 0))
            ports = iter(int(sock.getsockname()[1]) for sock in socks)
            self.namenode.http_port, self.namenode.rpc_port = next(ports), next(ports)
            for dn in self.datanodes:
                dn.http_port, dn.rpc_port, dn.ipc_port = next(ports), next(ports), next(ports)

    # --- addresses ----------------------------------------------------------------------

    @property
    def rpc_uri(self) -> str:
        """``hdfs://host:port``: what Hadoop's own clients (``hdfs dfs``) use."""
        return f"hdfs://{self.host}:{self.namenode.rpc_port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.namenode.http_port}"

    @property
    def webhdfs_uri(self) -> str:
        """``webhdfs://host:port``: what sparkpoint's storage uses (checkpoint dirs below it)."""
        return f"webhdfs://{self.http_address}"

    # --- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> LocalHdfs:
        """Format a new namespace, start every daemon, wait until all DataNodes are live
        and safe mode is off, and make ``/tmp`` writable by everyone (sticky, as usual)."""
        launched = (self.base_dir / daemons.STATE_FILE).exists()
        if launched and LocalHdfs.attach(self.base_dir).running():
            raise HdfsLaunchError(f"an HDFS launched from {self.base_dir} is running")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(_PORT_ATTEMPTS):
            for daemon in [self.namenode, *self.datanodes]:  # a new namespace, new data
                shutil.rmtree(self._dir(daemon), ignore_errors=True)
            self._write_configuration()
            self._format()
            try:
                self._spawn(self.namenode)
                for datanode in self.datanodes:
                    self._spawn(datanode)
                self._save_state()
                self.wait_ready(timeout=timeout)
                self._make_tmp_world_writable()
                return self
            except HdfsLaunchError:
                self.stop()
                # A free port can be taken by another process before the daemon binds it.
                if attempt + 1 == _PORT_ATTEMPTS or not self._lost_a_port():
                    raise
                self._pick_ports()
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        for daemon in [*self.datanodes, self.namenode]:
            self.stop_daemon(daemon, timeout=timeout)

    def stop_daemon(self, daemon: Daemon, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        """Stop one daemon (``signal.SIGKILL`` for a crash) and wait until it is gone."""
        if daemon.pid is None:
            return
        daemons.stop(daemon.pid, sig, timeout, lambda: self._alive(daemon))
        daemon.pid = None
        self._save_state()

    def start_daemon(self, daemon: Daemon) -> None:
        """(Re)start one daemon on its old ports and data (no format)."""
        if not self._alive(daemon):
            self._spawn(daemon)
            self._save_state()

    def wait_ready(self, timeout: float = 120.0, datanodes: int | None = None) -> dict[str, Any]:
        """Wait until the NameNode serves, ``datanodes`` (default: all running) are live
        and safe mode is off; returns the NameNode's report."""
        wanted = datanodes if datanodes is not None else len(self.running_datanodes())
        deadline = time.monotonic() + timeout
        report: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            for daemon in [self.namenode, *self.datanodes]:
                proc = self._procs.get(daemon.name)
                if proc is not None and proc.poll() is not None:
                    raise HdfsLaunchError(
                        f"HDFS {daemon.name} exited with {proc.returncode}; "
                        f"see {self._dir(daemon) / 'daemon.log'}"
                    )
            report = namenode_report(self.http_address)
            if report and report["live_datanodes"] >= wanted and not report["safe_mode"]:
                return report
            time.sleep(0.2)  # polling daemons that are still starting
        raise HdfsLaunchError(
            f"HDFS at {self.rpc_uri} not ready within {timeout:.0f} s (last report: {report}); "
            f"see the logs under {self.base_dir}"
        )

    def running(self) -> list[str]:
        return [d.name for d in [self.namenode, *self.datanodes] if self._alive(d)]

    def running_datanodes(self) -> list[Daemon]:
        return [d for d in self.datanodes if self._alive(d)]

    def status(self) -> dict[str, Any]:
        """Addresses, processes, and the NameNode's view (live DataNodes, safe mode,
        capacity), as ``sparkpoint hdfs status --json`` prints it."""
        report = namenode_report(self.http_address) if self._alive(self.namenode) else None
        return {
            "rpc_uri": self.rpc_uri,
            "webhdfs_uri": self.webhdfs_uri,
            "namenode_http": f"http://{self.http_address}",
            "superuser": self.superuser,
            "replication": self.replication,
            "block_size": self.block_size,
            "serving": report is not None,
            **(report or {}),
            "daemons": [
                {
                    "name": d.name,
                    "pid": d.pid if self._alive(d) else None,
                    "http": f"{self.host}:{d.http_port}",
                    "rpc" if d is self.namenode else "data": f"{self.host}:{d.rpc_port}",
                }
                for d in [self.namenode, *self.datanodes]
            ],
        }

    def datanode_counters(self) -> dict[str, dict[str, int]]:
        """Each running DataNode's block I/O counters (BytesRead, BytesWritten, …)."""
        return {
            d.name: datanode_counters(f"{self.host}:{d.http_port}")
            for d in self.running_datanodes()
        }

    def run_tool(
        self,
        main_class: str,
        *args: str,
        user: str | None = None,
        timeout: float = 120.0,
        discard_stdout: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one of Hadoop's command-line tools (``FS_SHELL_MAIN`` is ``hdfs dfs``,
        ``DFS_ADMIN_MAIN`` is ``hdfs dfsadmin``) against this cluster, as ``user``
        (default: the superuser). ``discard_stdout``: stream it to /dev/null (``-cat``
        of a large file) instead of capturing it."""
        env = {**os.environ, "HADOOP_USER_NAME": user or self.superuser}
        conf = self._conf_dir(self.namenode)
        command = [*self._java(conf, heap_mb=512, quick_jit=False), main_class, *args]
        return subprocess.run(
            command,
            stdout=subprocess.DEVNULL if discard_stdout else subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            timeout=timeout,
            check=False,
        )

    # --- persisted launcher state, so `sparkpoint hdfs stop` finds the processes --------

    def _state(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "replication": self.replication,
            "block_size": self.block_size,
            "heap_mb": self.heap_mb,
            "quick_jit": self.quick_jit,
            "superuser": self.superuser,
            "namenode": asdict(self.namenode),
            "datanodes": [asdict(d) for d in self.datanodes],
        }

    def _restore(self, home: Path, state: dict[str, Any]) -> None:
        self.base_dir = home
        self.host = state["host"]
        self.replication = state["replication"]
        self.block_size = state["block_size"]
        self.heap_mb = state["heap_mb"]
        self.quick_jit = state.get("quick_jit", True)
        self.superuser = state["superuser"]
        self.namenode = Daemon(**state["namenode"])
        self.datanodes = [Daemon(**d) for d in state["datanodes"]]

    # --- internals ----------------------------------------------------------------------

    def _dir(self, daemon: Daemon) -> Path:
        return self.base_dir / daemon.name

    def _conf_dir(self, daemon: Daemon) -> Path:
        return self._dir(daemon) / "conf"

    def _write_configuration(self) -> None:
        core, shared = cluster_properties(
            host=self.host,
            rpc_port=self.namenode.rpc_port,
            http_port=self.namenode.http_port,
            replication=self.replication,
            block_size=self.block_size,
        )
        core["hadoop.tmp.dir"] = str(self.base_dir / "tmp")
        nn_dir = self._dir(self.namenode)
        write_conf_dir(
            self._conf_dir(self.namenode),
            core,
            {**shared, "dfs.namenode.name.dir": str(nn_dir / "name")},
            nn_dir / "daemon.log",
        )
        for dn in self.datanodes:
            own = {
                "dfs.datanode.data.dir": str(self._dir(dn) / "data"),
                "dfs.datanode.address": f"{self.host}:{dn.rpc_port}",
                "dfs.datanode.http.address": f"{self.host}:{dn.http_port}",
                "dfs.datanode.ipc.address": f"{self.host}:{dn.ipc_port}",
            }
            log = self._dir(dn) / "daemon.log"
            write_conf_dir(self._conf_dir(dn), core, {**shared, **own}, log)

    def _java(self, conf_dir: Path, *, heap_mb: int, quick_jit: bool = True) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise HdfsLaunchError("java not found on PATH: Java 17+ is required")
        jars = jvm.classpath("hadoop")
        return [
            java, f"-Xmx{heap_mb}m", "-XX:+UseSerialGC",
            *(["-XX:TieredStopAtLevel=1"] if quick_jit else []),
            "-Djava.net.preferIPv4Stack=true", *JAVA17_OPENS,
            "-cp", os.pathsep.join([str(conf_dir), *map(str, jars)]),
        ]  # fmt: skip

    def _format(self) -> None:
        conf = self._conf_dir(self.namenode)
        command = [*self._java(conf, heap_mb=256), NAMENODE_MAIN, "-format", "-force"]
        command.append("-nonInteractive")
        result = subprocess.run(command, capture_output=True, timeout=120, check=False)
        if result.returncode != 0:
            tail = result.stdout.decode(errors="replace").strip().splitlines()[-10:]
            raise HdfsLaunchError("formatting the NameNode failed:\n" + "\n".join(tail))

    def _spawn(self, daemon: Daemon) -> None:
        main_class = NAMENODE_MAIN if daemon is self.namenode else DATANODE_MAIN
        conf = self._conf_dir(daemon)
        command = [*self._java(conf, heap_mb=self.heap_mb, quick_jit=self.quick_jit), main_class]
        proc = daemons.spawn_detached(command, self._dir(daemon) / "stdout.log")
        self._procs[daemon.name] = proc
        daemon.pid = proc.pid

    def _make_tmp_world_writable(self) -> None:
        # One WebHDFS call as the superuser: every user may then make directories under
        # /tmp, as on a typical cluster; everything else belongs to the superuser.
        url = (
            f"http://{self.http_address}/webhdfs/v1/tmp?op=MKDIRS&permission=1777"
            f"&user.name={self.superuser}"
        )
        request = urllib.request.Request(url, method="PUT")
        with urllib.request.urlopen(request, timeout=30) as answer:
            if not json.load(answer).get("boolean"):
                raise HdfsLaunchError(f"could not create /tmp on {self.rpc_uri}")

    def _lost_a_port(self) -> bool:
        return any(
            "BindException" in log.read_text(errors="replace")
            for log in self.base_dir.glob("*/daemon.log")
        )

    def _alive(self, daemon: Daemon) -> bool:
        main_class = NAMENODE_MAIN if daemon is self.namenode else DATANODE_MAIN
        return daemons.running(daemon.pid, self._procs.get(daemon.name), main_class)
