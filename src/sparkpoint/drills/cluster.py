"""Where a drill runs: a self-contained local cluster, or a running deployment.

Both give the drill the same few things: a read-only ZooKeeper connection for the
observer, the REST addresses to sample, a way to signal the replica with a given instance
id and to bring it back, and the workload that keeps checkpoints completing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.devcluster.hdfs import LocalHdfs
from sparkpoint.devcluster.zookeeper import LocalZooKeeper, ZooKeeperLaunchError
from sparkpoint.drills.faults import ProxyGroup, parse_quorum
from sparkpoint.drills.kafka_workload import KafkaOrdersPipeline, KafkaWorkloadError
from sparkpoint.drills.replicas import LocalReplica, ReplicaSettings, local_pid_of
from sparkpoint.drills.workload import (
    AckDriver,
    ClicksPipeline,
    DriverProcess,
    Workload,
    wait_started,
)
from sparkpoint.ha import HAError, ZooKeeperConnection, list_contenders
from sparkpoint.storage.uri import parse


class DrillError(RuntimeError):
    """The drill could not set up or reach what it needs (not an invariant violation)."""


class Target(Protocol):
    conn: ZooKeeperConnection
    workload: Workload
    settings: ReplicaSettings

    def addresses(self) -> list[str]: ...

    def can_signal(self, instance_id: str) -> bool: ...

    def signal(self, instance_id: str, sig: int) -> None: ...

    def restart(self, instance_id: str, timeout: float) -> None:
        """Bring the replica back (if it exited) and wait until it answers as a follower."""
        ...

    def close(self) -> None: ...


def _state_of(address: str) -> dict[str, object]:
    try:
        reply = httpx.get(f"{address}/v1/leader", timeout=0.5)
        return dict(reply.json().get("this") or {})
    except (httpx.HTTPError, ValueError):
        return {}


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise DrillError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class LocalCluster:
    """A 3-server ZooKeeper ensemble, three ``sparkpoint coordinator run`` replicas with
    leases on, and a workload (the demo pipeline, or the acknowledging driver)."""

    directory: Path
    settings: ReplicaSettings = field(default_factory=ReplicaSettings)
    pipeline: bool = True
    replicas_count: int = 3
    # Each replica reaches ZooKeeper through its own fault proxies (one per server), so a
    # drill can cut one replica off, or swallow its replies, and no one else.
    zookeeper_proxies: bool = False
    # The workload's checkpoint interval (ms); None: the workload's own default.
    checkpoint_interval_ms: int | None = None
    # The demo pipeline's state backend; None: its own default.
    state_backend: str | None = None
    # Where checkpoints go (a local path or an HDFS URI); None: ``directory/checkpoints``.
    checkpoint_root: str | None = None
    # The HDFS holding ``checkpoint_root``, when it is one this machine runs (its faults).
    hdfs: LocalHdfs | None = None
    # Brokers of a local Kafka for the Kafka workload (the orders job, Kafka to Kafka);
    # 0: the demo pipeline on generated clicks.
    kafka_nodes: int = 0
    # Drivers of jobs a fault started beside the workload's (from its checkpoints): their
    # jobs are checked with it, their processes stopped with it.
    other_drivers: list[DriverProcess] = field(default_factory=list)

    def start(self) -> LocalCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        # A short tick lets the ensemble accept short sessions and re-elect quickly.
        self.zk = LocalZooKeeper(self.directory / "zookeeper", servers=3, tick_time_ms=200)
        try:
            self.zk.start()
        except ZooKeeperLaunchError as exc:
            raise DrillError(f"ZooKeeper did not start: {exc}") from exc
        servers = parse_quorum(self.zk.connect_string)
        self.proxies = {
            f"coordinator-{i + 1}": ProxyGroup(servers)
            for i in range(self.replicas_count if self.zookeeper_proxies else 0)
        }
        cluster_id = f"drill-{uuid.uuid4().hex[:8]}"
        self.conn = ZooKeeperConnection(
            ZooKeeperSettings(
                quorum=self.zk.connect_string,
                cluster_id=cluster_id,
                session_timeout_s=self.settings.session_timeout_s,
            )
        ).start()
        self.replicas = [
            LocalReplica(
                name, self.directory / "replicas",
                self.proxies[name].connect_string if name in self.proxies
                else self.zk.connect_string,
                cluster_id, self.checkpoint_dir, self.savepoint_dir, self.settings,
            ).start()
            for name in (f"coordinator-{i + 1}" for i in range(self.replicas_count))
        ]  # fmt: skip
        _wait(lambda: sum(_state_of(r.address).get("ready") is True for r in self.replicas)
              == len(self.replicas), 60, "every replica ready")  # fmt: skip
        addresses = [r.address for r in self.replicas]
        self.workload: Workload
        if self.pipeline:
            pipeline: DriverProcess = (
                KafkaOrdersPipeline(addresses, self.directory / "pipeline",
                                    kafka_nodes=self.kafka_nodes) if self.kafka_nodes
                else ClicksPipeline(addresses, self.directory / "pipeline",
                                    state_backend=self.state_backend))  # fmt: skip
            if self.checkpoint_interval_ms is not None:
                pipeline.interval_ms = self.checkpoint_interval_ms
            self.workload = pipeline  # set first: close() stops what start() began
            try:
                pipeline.start()
            except KafkaWorkloadError as exc:
                raise DrillError(str(exc)) from exc
            if not wait_started(pipeline, 180):
                raise DrillError(f"the demo pipeline did not start; see {pipeline.directory}")
        else:
            self.workload = AckDriver(addresses)
            if self.checkpoint_interval_ms is not None:
                self.workload.interval_ms = self.checkpoint_interval_ms
            self.workload.start()
        return self

    @property
    def checkpoint_dir(self) -> str:
        """``state.checkpoints.dir`` of every replica: a local path or an HDFS URI."""
        return self.checkpoint_root or str(self.directory / "checkpoints")

    @property
    def savepoint_dir(self) -> str:
        """``state.savepoints.dir``: beside the checkpoints, on the same storage."""
        return str(parse(self.checkpoint_dir).parent.child("savepoints"))

    def addresses(self) -> list[str]:
        return [r.address for r in self.replicas]

    def job_ids(self) -> list[str]:
        """The workload's job and every job a fault started beside it."""
        return [self.workload.job_id, *(d.job_id for d in self.other_drivers)]

    def replica(self, instance_id: str) -> LocalReplica:
        for r in self.replicas:
            if r.name == instance_id:
                return r
        raise DrillError(f"no local replica named {instance_id!r}")

    def can_signal(self, instance_id: str) -> bool:
        return any(r.name == instance_id and r.alive() for r in self.replicas)

    def signal(self, instance_id: str, sig: int) -> None:
        self.replica(instance_id).signal(sig)

    def restart(self, instance_id: str, timeout: float) -> None:
        replica = self.replica(instance_id)
        if not replica.alive():
            replica.wait_exit(10)
            replica.start()
        _wait(lambda: _state_of(replica.address).get("state") == "follower"
              and _state_of(replica.address).get("ready") is True,
              timeout, f"{instance_id} back as a ready follower")  # fmt: skip

    def zookeeper_link(self, instance_id: str) -> ProxyGroup:
        """The proxies between this replica and the ensemble."""
        if instance_id not in self.proxies:
            raise DrillError(f"{instance_id!r} reaches ZooKeeper directly (no fault proxy)")
        return self.proxies[instance_id]

    def close(self) -> None:
        for driver in self.other_drivers:
            driver.abort()
        with contextlib.suppress(Exception):
            self.workload.abort()
        for replica in getattr(self, "replicas", []):
            replica.stop()
        for group in getattr(self, "proxies", {}).values():
            group.close()
        if hasattr(self, "conn"):
            self.conn.close()
        if hasattr(self, "zk"):
            self.zk.stop()


@dataclass
class RemoteTarget:
    """A running deployment. The drill signals a replica only if it runs on this machine
    (found by the pid in its default instance id ``<host>-<pid>``); ``restart_command``
    (a shell command; ``{instance_id}`` and ``{pid}`` are filled in) brings it back,
    otherwise the deployment's supervisor must, and the drill waits until as many
    replicas answer as before. ``signal_command`` (``{instance_id}``, ``{signal}`` as in
    ``KILL``) delivers the signal instead, for replicas elsewhere."""

    quorum: str
    cluster_id: str
    root: str | None
    settings: ReplicaSettings
    restart_command: str | None = None
    job_id: str | None = None
    signal_command: str | None = None

    def start(self) -> RemoteTarget:
        extra = {"root": self.root} if self.root else {}
        self.conn = ZooKeeperConnection(
            ZooKeeperSettings(quorum=self.quorum, cluster_id=self.cluster_id, **extra)  # type: ignore[arg-type]
        ).start()
        self._pids: dict[str, int] = {}
        self.workload = AckDriver(self.addresses() or [], job_id=self.job_id or "drill-job")
        if not self.addresses():
            raise DrillError("no contender publishes a REST address: is the cluster running?")
        self.workload.start()
        return self

    def addresses(self) -> list[str]:
        try:
            return [c.address for c in list_contenders(self.conn) if c.address.startswith("http")]
        except HAError:
            return []

    def can_signal(self, instance_id: str) -> bool:
        return self.signal_command is not None or local_pid_of(instance_id) is not None

    def signal(self, instance_id: str, sig: int) -> None:
        self._answering_before = len(self._answering())
        if self.signal_command:
            name = signal.Signals(sig).name.removeprefix("SIG")
            command = self.signal_command.format(instance_id=shlex.quote(instance_id), signal=name)
            subprocess.run(command, shell=True, check=True, timeout=60)
            return
        pid = local_pid_of(instance_id)
        if pid is None:
            raise DrillError(
                f"leader {instance_id!r} does not run on this machine (or has a custom "
                "instance id): the drill can only signal local processes"
            )
        self._pids[instance_id] = pid
        os.kill(pid, sig)

    def _answering(self) -> list[str]:
        return [a for a in self.addresses() if _state_of(a).get("ready") is True]

    def restart(self, instance_id: str, timeout: float) -> None:
        if self.restart_command:
            command = self.restart_command.format(
                instance_id=shlex.quote(instance_id), pid=self._pids.get(instance_id, "")
            )
            subprocess.run(command, shell=True, check=False, timeout=timeout)
        before = getattr(self, "_answering_before", 1)
        _wait(lambda: len(self._answering()) >= before, timeout,
              f"{before} replicas ready again")  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.workload.abort()
        self.conn.close()
