"""Start and stop a real ZooKeeper server, or a 3-server ensemble, on this machine.

The jars come from ``SPARKPOINT_ZK_CLASSPATH``, else Debian's ``zookeeper`` package, else
the ZooKeeper jars that ship inside the installed pyspark — so Java is the only
prerequisite. Used by ``sparkpoint zookeeper …``, ``sparkpoint demo`` and the test suite.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sparkpoint.ops.devcluster import daemons

# The smallest set of jars a ZooKeeper 3.9 server needs, plus log4j so it can write a log.
_REQUIRED_JARS = ("zookeeper-", "zookeeper-jute-", "slf4j-api-", "commons-io-", "metrics-core-")
_OPTIONAL_JARS = (
    "audience-annotations-", "netty-buffer-", "netty-codec-", "netty-common-",
    "netty-handler-", "netty-transport-", "snappy-java-",
    # Netty 4.2 split these out; the secure client port (TLS) needs them.
    "netty-codec-base-", "netty-resolver-", "netty-transport-native-unix-common-",
    "netty-transport-classes-epoll-",
    "log4j-api-", "log4j-core-", "log4j-slf4j2-impl-",
)  # fmt: skip


class ZooKeeperLaunchError(RuntimeError):
    """The server could not be found, started, or did not answer in time."""


def find_classpath() -> str:
    """The ZooKeeper server classpath, from the first source that has one."""
    explicit = os.environ.get("SPARKPOINT_ZK_CLASSPATH")
    if explicit:
        return explicit
    for jar_dir in (Path("/usr/share/zookeeper/lib"), Path("/usr/share/java")):
        if (jar_dir / "zookeeper.jar").exists():
            return f"{jar_dir}/*"
    spec = importlib.util.find_spec("pyspark")  # locate, never import: pyspark is heavy
    if spec is not None and spec.origin is not None:
        jars = Path(spec.origin).parent / "jars"
        picked = _pick_jars(jars)
        if picked:
            return os.pathsep.join(str(p) for p in picked)
    raise ZooKeeperLaunchError(
        "no ZooKeeper jars found: set SPARKPOINT_ZK_CLASSPATH, install Debian's 'zookeeper' "
        "package, or install pyspark (its jars include a ZooKeeper server)"
    )


def _pick_jars(jar_dir: Path) -> list[Path]:
    if not jar_dir.is_dir():
        return []
    names = sorted(p.name for p in jar_dir.glob("*.jar"))

    def first(prefix: str) -> Path | None:
        # "zookeeper-" must not pick "zookeeper-jute-": the version follows the prefix.
        for name in names:
            if name.startswith(prefix) and name[len(prefix) : len(prefix) + 1].isdigit():
                return jar_dir / name
        return None

    required = [first(p) for p in _REQUIRED_JARS]
    if any(p is None for p in required):
        return []
    optional = [first(p) for p in _OPTIONAL_JARS]
    return [p for p in [*required, *optional] if p is not None]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ('' if unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def server_mode(host: str, port: int) -> str | None:
    """'standalone', 'leader' or 'follower' while serving, else None."""
    for line in four_letter_word(host, port, "srvr").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


@dataclass
class ServerSpec:
    server_id: int
    client_port: int
    peer_port: int
    election_port: int
    pid: int | None = None
    secure_port: int = 0  # the TLS client port, when the server has one


@dataclass(frozen=True)
class ServerTLS:
    """A secure client port: PEM files (ZooKeeper 3.9 reads PEM key and trust stores).

    ``keystore``: the server's private key and certificate chain in one file;
    ``truststore``: the CA(s) client certificates are checked against; ``client_auth``:
    ZooKeeper's ``ssl.clientAuth`` (need, want or none).
    """

    keystore: Path
    truststore: Path
    client_auth: str = "need"


_LOG4J2 = """<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="${sys:zookeeper.log.file}">
      <PatternLayout pattern="%d{ISO8601} %-5p [%t] %c{1}: %m%n"/>
    </File>
  </Appenders>
  <Loggers><Root level="info"><AppenderRef ref="file"/></Root></Loggers>
</Configuration>
"""


class LocalZooKeeper(daemons.Launcher):
    """One ZooKeeper server or a 3-server ensemble on loopback, with its data in ``base_dir``.

    >>> zk = LocalZooKeeper("/tmp/zk", servers=1)   # doctest: +SKIP
    >>> zk.start(); print(zk.connect_string); zk.stop()   # doctest: +SKIP
    """

    what = "ZooKeeper"
    error = ZooKeeperLaunchError

    def __init__(
        self,
        base_dir: str | Path,
        *,
        servers: int = 1,
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 2000,
        max_session_timeout_ms: int = 600_000,
        classpath: str | None = None,
        java: str = "java",
        tls: ServerTLS | None = None,
        sasl_users: dict[str, str] | None = None,
    ) -> None:
        """``tls``: also serve a secure client port (Netty); ``sasl_users``: user → password
        accepted over SASL DIGEST-MD5 (and the ``sasl`` ACL scheme enabled). Neither
        changes the plain client port, which stays for probes and four-letter words."""
        if servers not in (1, 3):
            raise ZooKeeperLaunchError(f"servers must be 1 or 3, not {servers}")
        self.base_dir = Path(base_dir).resolve()
        self.host = host
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._classpath = classpath
        self._java = java
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self.tls = tls
        self.sasl_users = dict(sasl_users or {})
        first = port or free_port(host)
        self.servers = [
            ServerSpec(
                server_id=i + 1,
                client_port=first + i if port else (first if i == 0 else free_port(host)),
                peer_port=free_port(host) if servers > 1 else 0,
                election_port=free_port(host) if servers > 1 else 0,
            )
            for i in range(servers)
        ]
        if tls is not None:
            for spec in self.servers:
                spec.secure_port = free_port(host)

    # --- addresses ----------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        return ",".join(f"{self.host}:{s.client_port}" for s in self.servers)

    @property
    def secure_connect_string(self) -> str:
        """The TLS client ports (only with ``tls``)."""
        if self.tls is None:
            raise ZooKeeperLaunchError("this ZooKeeper was started without tls")
        return ",".join(f"{self.host}:{s.secure_port}" for s in self.servers)

    def server(self, server_id: int) -> ServerSpec:
        return self.servers[server_id - 1]

    # --- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> LocalZooKeeper:
        """Start every server and wait until the ensemble serves requests."""
        previous = self.base_dir / daemons.STATE_FILE
        if self.running_servers() or (
            previous.exists() and LocalZooKeeper.attach(self.base_dir).running_servers()
        ):
            raise ZooKeeperLaunchError(f"a ZooKeeper launched from {self.base_dir} is running")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        classpath = self._classpath or find_classpath()
        for spec in self.servers:
            self._write_config(spec)
        for spec in self.servers:
            self._spawn(spec, classpath)
        self._save_state()
        try:
            self.wait_serving(timeout=timeout)
        except ZooKeeperLaunchError:
            self.stop()
            raise
        return self

    def start_server(self, server_id: int) -> None:
        """(Re)start one server of an ensemble whose files already exist."""
        spec = self.server(server_id)
        if self._alive(spec):
            return
        self._spawn(spec, self._classpath or find_classpath())
        self._save_state()

    def stop_server(self, server_id: int, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        spec = self.server(server_id)
        if spec.pid is None:
            return
        daemons.stop(spec.pid, sig, timeout, lambda: self._alive(spec))
        spec.pid = None
        self._save_state()

    def stop(self, timeout: float = 10.0) -> None:
        for spec in self.servers:
            self.stop_server(spec.server_id, timeout=timeout)

    def wait_serving(self, server_ids: list[int] | None = None, timeout: float = 60.0) -> None:
        """Wait until the given servers (default: all) answer as part of a quorum."""
        wanted = [self.server(i) for i in (server_ids or [s.server_id for s in self.servers])]
        deadline = time.monotonic() + timeout
        while True:
            if all(server_mode(self.host, s.client_port) for s in wanted):
                return
            for spec in wanted:
                proc = self._procs.get(spec.server_id)
                if proc is not None and proc.poll() is not None:
                    raise ZooKeeperLaunchError(
                        f"ZooKeeper server {spec.server_id} exited with {proc.returncode}; "
                        f"see {self._dir(spec) / 'zookeeper.log'}"
                    )
            if time.monotonic() > deadline:
                raise ZooKeeperLaunchError(
                    f"ZooKeeper at {self.connect_string} did not serve within {timeout:.0f} s; "
                    f"see the logs under {self.base_dir}"
                )
            time.sleep(0.1)

    def running_servers(self) -> list[int]:
        return [s.server_id for s in self.servers if self._alive(s)]

    def status(self) -> list[dict[str, object]]:
        return [
            {
                "server": s.server_id,
                "address": f"{self.host}:{s.client_port}",
                "pid": s.pid if self._alive(s) else None,
                "mode": server_mode(self.host, s.client_port) if self._alive(s) else None,
            }
            for s in self.servers
        ]

    # --- persisted launcher state, so `sparkpoint zookeeper stop` finds the processes ----

    def _state(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "tick_time_ms": self.tick_time_ms,
            "max_session_timeout_ms": self.max_session_timeout_ms,
            "classpath": self._classpath,
            "servers": [asdict(s) for s in self.servers],
        }

    def _restore(self, home: Path, state: dict[str, Any]) -> None:
        self.base_dir = home
        self.host = state["host"]
        self.tick_time_ms = state["tick_time_ms"]
        self.max_session_timeout_ms = state["max_session_timeout_ms"]
        self._classpath = state["classpath"]
        self._java = "java"
        self.tls = None  # only what stopping and status need is restored
        self.sasl_users = {}
        self.servers = [ServerSpec(**s) for s in state["servers"]]

    # --- internals ----------------------------------------------------------------------

    def _dir(self, spec: ServerSpec) -> Path:
        return self.base_dir / f"server-{spec.server_id}"

    def _write_config(self, spec: ServerSpec) -> None:
        directory = self._dir(spec)
        (directory / "data").mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={directory / 'data'}",
            f"clientPort={spec.client_port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={2 * self.tick_time_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "maxClientCnxns=0",
        ]
        if self.tls is not None:
            lines += [
                f"secureClientPort={spec.secure_port}",
                f"secureClientPortAddress={self.host}",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"ssl.keyStore.location={self.tls.keystore}",
                "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={self.tls.truststore}",
                "ssl.trustStore.type=PEM",
                f"ssl.clientAuth={self.tls.client_auth}",
            ]
        if self.sasl_users:
            lines.append(
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
            )
            users = "".join(f'\n  user_{u}="{p}"' for u, p in self.sasl_users.items())
            (directory / "jaas.conf").write_text(
                f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required"
                f"{users};\n}};\n"
            )
        if len(self.servers) > 1:
            # initLimit/syncLimit are in ticks; keep them in seconds whatever the tick.
            lines += [
                f"initLimit={max(10, 10_000 // self.tick_time_ms)}",
                f"syncLimit={max(5, 5_000 // self.tick_time_ms)}",
                *(
                    f"server.{s.server_id}={self.host}:{s.peer_port}:{s.election_port}"
                    for s in self.servers
                ),
            ]
            (directory / "data" / "myid").write_text(f"{spec.server_id}\n")
        (directory / "zoo.cfg").write_text("\n".join(lines) + "\n")
        (directory / "log4j2.xml").write_text(_LOG4J2)

    def _spawn(self, spec: ServerSpec, classpath: str) -> None:
        java = shutil.which(self._java)
        if java is None:
            raise ZooKeeperLaunchError("java not found on PATH: Java 17+ is required")
        directory = self._dir(spec)
        command = [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts faster; a test server needs no C2
            f"-Dlog4j2.configurationFile={directory / 'log4j2.xml'}",
            f"-Dzookeeper.log.file={directory / 'zookeeper.log'}",
            "-Dzookeeper.jmx.log4j.disable=true",
            *(
                [f"-Djava.security.auth.login.config={directory / 'jaas.conf'}"]
                if (directory / "jaas.conf").exists()
                else []
            ),
            "-cp",
            classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(directory / "zoo.cfg"),
        ]
        proc = daemons.spawn_detached(command, directory / "stdout.log")
        self._procs[spec.server_id] = proc
        spec.pid = proc.pid

    def _alive(self, spec: ServerSpec) -> bool:
        return daemons.running(spec.pid, self._procs.get(spec.server_id), "QuorumPeerMain")
