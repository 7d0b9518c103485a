"""A real Kafka cluster on this machine: 1 or 3 nodes in KRaft mode, on free loopback ports.

Kafka's own jars come through the JVM-artifact mechanism (the ``kafka`` set of
:mod:`sparkpoint.ops.devcluster.jvm`), so Java 17 and Maven are the only prerequisites. Each node
runs as broker and controller at once (KRaft's combined mode, no ZooKeeper), with its own
``server.properties``, data and log under ``<directory>/node-<id>``; the storage is
formatted once with Kafka's ``StorageTool``. Internal topics (offsets, transaction state)
get a replication factor equal to the node count, so a 3-node cluster survives the restart
of one node with transactions going on. A node restarted keeps its data. The launcher's
state (ports, pids) is in ``launcher.json``, so `sparkpoint kafka stop` finds the processes.
Used by `sparkpoint kafka`, the connector tests, the demo and the benchmark.
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sparkpoint.ops.devcluster import daemons
from sparkpoint.ops.devcluster.jvm import classpath
from sparkpoint.ops.devcluster.system_servers import free_port

_SERVER_MAIN = "kafka.Kafka"
_STORAGE_MAIN = "kafka.tools.StorageTool"
_LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
"""


class KafkaLaunchError(RuntimeError):
    """A node could not be formatted, started or stopped; the message says which and where."""


@dataclass
class KafkaNode:
    node_id: int
    port: int  # the client (PLAINTEXT) listener
    controller_port: int
    pid: int | None = None


class LocalKafka(daemons.Launcher):
    """``start()``/``stop()``/``restart_node()``; ``bootstrap`` is the client address list.

    >>> kafka = LocalKafka("/tmp/kafka", nodes=1).start()   # doctest: +SKIP
    >>> kafka.bootstrap                                    # doctest: +SKIP
    '127.0.0.1:40123'
    """

    what = "Kafka"
    error = KafkaLaunchError

    def __init__(
        self,
        directory: str | Path,
        *,
        nodes: int = 1,
        heap_mb: int = 512,
        settings: dict[str, object] | None = None,
    ) -> None:
        """``settings``: broker properties set beside (or instead of) the defaults below,
        e.g. ``{"auto.create.topics.enable": "false"}``."""
        if nodes not in (1, 3):
            raise KafkaLaunchError(f"nodes must be 1 or 3, not {nodes}")
        self.directory = Path(directory).resolve()
        self.heap_mb = heap_mb
        self.settings = dict(settings or {})
        self.cluster_id = _cluster_id()
        self.nodes = [KafkaNode(i + 1, free_port(), free_port()) for i in range(nodes)]
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> LocalKafka:
        """Format (first time only) and start every node; returns once clients can produce."""
        if (self.directory / daemons.STATE_FILE).exists() and LocalKafka.attach(
            self.directory
        ).running_nodes():
            raise KafkaLaunchError(f"a Kafka launched from {self.directory} is running")
        self.directory.mkdir(parents=True, exist_ok=True)
        jars = _classpath()
        for node in self.nodes:
            self._configure(node, jars)
        for node in self.nodes:
            self._spawn(node, jars)
        self._save_state()
        try:
            self.wait_serving(timeout=timeout)
        except KafkaLaunchError:
            self.stop()
            raise
        return self

    def wait_serving(self, node_ids: list[int] | None = None, timeout: float = 120.0) -> None:
        """Wait until the nodes accept clients and the cluster has a controller leader."""
        wanted = [self.node(i) for i in (node_ids or [n.node_id for n in self.nodes])]
        deadline = time.monotonic() + timeout
        for node in wanted:
            while not _accepts(node.port):
                proc = self._procs.get(node.node_id)
                if proc is not None and proc.poll() is not None:
                    raise KafkaLaunchError(
                        f"Kafka node {node.node_id} exited with {proc.returncode}; "
                        f"see {self._dir(node) / 'logs' / 'server.log'}"
                    )
                if time.monotonic() > deadline:
                    raise KafkaLaunchError(
                        f"Kafka node {node.node_id} did not serve on {node.port} within "
                        f"{timeout:g} s; see {self._dir(node) / 'logs'}"
                    )
                time.sleep(0.1)  # polling a server that is not listening yet
        _wait_metadata(self.bootstrap, len(self.nodes), deadline)

    def stop_node(self, node_id: int, sig: int = signal.SIGTERM, timeout: float = 60.0) -> None:
        """SIGTERM: a controlled shutdown; SIGKILL: a crash."""
        node = self.node(node_id)
        if node.pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, sig)
        if not self._wait_exit(node, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            self._wait_exit(node, 10)
        node.pid = None
        self._save_state()

    def start_node(self, node_id: int, timeout: float = 120.0) -> None:
        node = self.node(node_id)
        if not self._alive(node):
            self._spawn(node, _classpath())
            self._save_state()
        self.wait_serving([node_id], timeout)

    def restart_node(self, node_id: int, sig: int = signal.SIGTERM) -> None:
        self.stop_node(node_id, sig)
        self.start_node(node_id)

    def stop(self, timeout: float = 60.0) -> None:
        for node in self.nodes:
            self.stop_node(node.node_id, timeout=timeout)

    def running_nodes(self) -> list[int]:
        return [n.node_id for n in self.nodes if self._alive(n)]

    def status(self) -> list[dict[str, object]]:
        return [
            {
                "node": n.node_id,
                "address": f"127.0.0.1:{n.port}",
                "pid": n.pid if self._alive(n) else None,
                "serving": self._alive(n) and _accepts(n.port),
            }
            for n in self.nodes
        ]

    # -- launcher state -----------------------------------------------------------------

    @property
    def home(self) -> Path:
        return self.directory

    def _state(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "heap_mb": self.heap_mb,
            "settings": self.settings,
            "nodes": [asdict(n) for n in self.nodes],
        }

    def _restore(self, home: Path, state: dict[str, Any]) -> None:
        self.directory = home
        self.heap_mb = state["heap_mb"]
        self.settings = state.get("settings", {})
        self.cluster_id = state["cluster_id"]
        self.nodes = [KafkaNode(**n) for n in state["nodes"]]

    # -- internals ----------------------------------------------------------------------

    def _dir(self, node: KafkaNode) -> Path:
        return self.directory / f"node-{node.node_id}"

    def _configure(self, node: KafkaNode, jars: str) -> None:
        directory = self._dir(node)
        (directory / "logs").mkdir(parents=True, exist_ok=True)
        replicas = len(self.nodes)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        properties = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": directory / "data",
            "num.partitions": 1,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            "transaction.state.log.num.partitions": 4,
            "default.replication.factor": replicas,
            "min.insync.replicas": min(2, replicas),
            "group.initial.rebalance.delay.ms": 0,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min(2, replicas),
            # The transaction timeout a client may ask for (KafkaSink checks its own).
            "transaction.max.timeout.ms": 900_000,
            **self.settings,
        }
        config = directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        (directory / "log4j2.properties").write_text(_LOG4J2)
        if (directory / "data" / "meta.properties").exists():
            return  # formatted before: a restart keeps the data
        result = subprocess.run(
            [_java(), "-cp", jars, _STORAGE_MAIN, "format", "-t", self.cluster_id,
             "-c", str(config), "--ignore-formatted"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise KafkaLaunchError(
                f"formatting Kafka node {node.node_id} failed: "
                f"{(result.stderr or result.stdout)[-2000:]}"
            )

    def _spawn(self, node: KafkaNode, jars: str) -> None:
        directory = self._dir(node)
        command = [
            _java(), f"-Xmx{self.heap_mb}m", "-Xss1m", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts faster; a local broker needs no C2
            f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={directory / 'logs'}",
            "-cp", jars, _SERVER_MAIN, str(directory / "server.properties"),
        ]  # fmt: skip
        with open(directory / "logs" / "stdout.log", "ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives the launching command (and its Ctrl-C)
            )
        self._procs[node.node_id] = proc
        node.pid = proc.pid

    def _alive(self, node: KafkaNode) -> bool:
        if node.pid is None:
            return False
        proc = self._procs.get(node.node_id)
        if proc is not None:
            return proc.poll() is None
        try:
            os.kill(node.pid, 0)
        except ProcessLookupError:
            return False
        return _is_kafka(node.pid)

    def _wait_exit(self, node: KafkaNode, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._alive(node):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)  # waiting for a process to exit
        proc = self._procs.pop(node.node_id, None)
        if proc is not None:
            proc.wait()
        return True


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 chars),
    never starting with ``-`` (one in 64 would): the storage tool's ``-t`` would take it
    for an option and refuse to format (Kafka's own ``Uuid.randomUuid`` skips those too)."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _classpath() -> str:
    return os.pathsep.join(str(j) for j in classpath("kafka"))


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaLaunchError("java not found on PATH: Kafka 4 needs Java 17+")
    return java


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _is_kafka(pid: int) -> bool:
    """The pid is still a Kafka node (not a reused pid) — as far as /proc tells."""
    try:
        return _SERVER_MAIN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the pid


def _wait_metadata(bootstrap: str, brokers: int, deadline: float) -> None:
    """Until a client sees every broker and a controller (KRaft quorum formed)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
    last = ""
    while time.monotonic() < deadline:
        try:
            cluster = admin.describe_cluster(request_timeout=2).result(timeout=5)
            if len(cluster.nodes) >= brokers and cluster.controller is not None:
                return
            last = f"{len(cluster.nodes)} of {brokers} brokers registered"
        except KafkaException as exc:
            last = str(exc)
        time.sleep(0.2)  # the quorum is forming
    raise KafkaLaunchError(f"Kafka at {bootstrap} not ready in time: {last}")
