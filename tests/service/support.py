"""Replica processes and a test driver for the service tests: real processes, real HTTP."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from sparkpoint.checkpoint import JobGraph, OperatorSpec
from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.config import load_config
from sparkpoint.ops.devcluster.zookeeper import free_port
from sparkpoint.service import Service, start_service
from tests.coordinator.support import keyed_state
from tests.support.waiting import wait_until

SPARKPOINT = str(Path(sys.executable).parent / "sparkpoint")


@dataclass
class ReplicaProcess:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"http://{self.host}:{self.port}"

    def leader_view(self) -> dict[str, Any] | None:
        """GET /v1/leader on this replica, or None if it does not answer."""
        try:
            response = httpx.get(f"{self.address}/v1/leader", timeout=1.0)
            return response.json() if response.status_code == 200 else None
        except httpx.HTTPError:
            return None

    def state(self) -> str | None:
        view = self.leader_view()
        return view["this"]["state"] if view else None

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.address}/metrics", timeout=2.0).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def spawn_replica(
    directory: Path,
    name: str,
    *,
    quorum: str,
    cluster_id: str,
    checkpoints_dir: Path,
    session_timeout: str = "2 s",
    settings: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
) -> ReplicaProcess:
    """A `sparkpoint coordinator run` process; ``prefix`` runs it elsewhere (e.g. inside a
    network namespace) and ``host`` is where it is reached; ``port`` reuses a port (a
    restart), a free one by default."""
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = directory / f"{name}.log"
    values = {
        "high-availability.instance-id": name,
        "high-availability.zookeeper.client.session-timeout": session_timeout,
        "high-availability.zookeeper.client.retry-wait": "50 ms",
        "high-availability.lease.renew-interval": "100 ms",
        "high-availability.lease.takeover-timeout": "1 s",
        "state.checkpoints.dir": str(checkpoints_dir),
        "state.checkpoints.num-retained": "1000",
        "heartbeat.timeout": "5 s",
        "rest.auth.enabled": "false",  # tests/service/test_auth.py turns it on
        # Savepoints anywhere under the test's own directory (e.g. a pipeline's work dir).
        "state.savepoints.allowed-dirs": str(directory.parent),
        **(settings or {}),
    }
    command = [
        *(prefix or []),
        SPARKPOINT, "coordinator", "run", "--zookeeper", quorum, "--cluster-id", cluster_id,
        "--port", str(port),
    ]  # fmt: skip
    for key, value in values.items():
        command += ["--set", f"{key}={value}"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return ReplicaProcess(name, port, proc, log_path, host)


def spawn_embedded(directory: Path, name: str) -> ReplicaProcess:
    """`sparkpoint coordinator run --embedded`: one process, no ZooKeeper."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = directory / f"{name}.log"
    command = [
        SPARKPOINT, "coordinator", "run", "--embedded", "--port", str(port),
        "--set", f"state.checkpoints.dir={directory / 'checkpoints'}",
    ]  # fmt: skip
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return ReplicaProcess(name, port, proc, log_path)


def empty_acks(graph: JobGraph, run_id: str) -> dict[str, Any]:
    """An acks request body of driver run ``run_id`` for every subtask of ``graph``, with
    empty state — what a held acknowledgement sent late to a deposed leader looks like."""
    return {
        "acks": [
            {"operator_uid": op.uid, "subtask": i, "state": {"keyed": [], "operator": []}}
            for op in graph.operators
            for i in range(op.parallelism)
        ],
        "run_id": run_id,
    }


def start_in_process(
    tmp_path: Path, quorum: str, cluster_id: str, settings: dict[str, str] | None = None
) -> Service:
    """A coordinator replica in this process (its term, cleanup worker and sessions in
    reach of the test), leading on a real ZooKeeper."""
    return _serve(tmp_path, {
        "high-availability.zookeeper.quorum": quorum,
        "high-availability.cluster-id": cluster_id,
        "high-availability.zookeeper.client.session-timeout": "2 s",
        "high-availability.lease.renew-interval": "100 ms",
        "high-availability.lease.takeover-timeout": "1 s",
        "state.savepoints.dir": str(tmp_path / "savepoints"),
        **(settings or {}),
    }, ready_within_s=60)  # fmt: skip


def start_alone(tmp_path: Path, settings: dict[str, str] | None = None) -> Service:
    """A coordinator replica in this process without high availability (it leads alone),
    auth off unless ``settings`` turn it on."""
    return _serve(tmp_path, {"high-availability.type": "none", **(settings or {})},
                  ready_within_s=20)  # fmt: skip


def _serve(tmp_path: Path, settings: dict[str, str], ready_within_s: float) -> Service:
    """A replica in this process on a free port, auth off and checkpoints under
    ``tmp_path`` unless ``settings`` say otherwise, once it leads."""
    config = load_config(
        overrides={
            "rest.port": "0",
            "rest.auth.enabled": "false",
            "state.checkpoints.dir": str(tmp_path / "checkpoints"),
            **settings,
        },
        environ={},
    )
    service = start_service(config)
    wait_until(service.replica.is_ready, timeout=ready_within_s, message="replica leads")
    return service


def make_graph(job_id: str, parallelism: int = 2) -> JobGraph:
    return JobGraph(
        job_id,
        (
            OperatorSpec("source", parallelism, 128),
            OperatorSpec("count", parallelism, 128, keyed=True),
        ),
    )


@dataclass
class Driver:
    """Acts like a pipeline driver: registers once, heartbeats, acknowledges every trigger
    (inline keyed state), and records what it was told — on a thread, through the client."""

    addresses: list[str]
    graph: JobGraph
    interval_ms: int = 500
    registrations: int = 0
    triggered: list[tuple[int, int]] = field(default_factory=list)  # (epoch, id)
    completed: list[tuple[int, int]] = field(default_factory=list)
    aborted: list[tuple[int, int, str]] = field(default_factory=list)
    ack_errors: list[str] = field(default_factory=list)
    acking: threading.Event = field(default_factory=threading.Event)
    held: list[tuple[int, int]] = field(default_factory=list)  # triggers not acked (paused)
    #: Made up per heartbeat, as a pipeline driver reports it (the UI's Jobs page).
    progress: Callable[[], dict[str, Any]] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Driver:
        self.client = CoordinatorClient(self.addresses, timeout_s=3.0, retry_for_s=60.0)
        self.client.register_job(self.graph, {"interval_ms": self.interval_ms})
        self.registrations += 1
        self.acking.set()
        self._thread = threading.Thread(target=self._run, name="test-driver", daemon=True)
        self._thread.start()
        return self

    @property
    def run_id(self) -> str:
        """The driver run its registration started."""
        run = self.client.run_id(self.graph.job_id)
        assert run is not None
        return run

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self.client.close()

    def completed_ids(self, epoch: int | None = None) -> list[int]:
        return [cid for e, cid in self.completed if epoch is None or e == epoch]

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                progress = self.progress() if self.progress is not None else None
                beat = self.client.heartbeat(self.graph.job_id, seq, progress=progress)
            except ClientError as exc:
                self.ack_errors.append(f"heartbeat: {exc}")
                self._stop.wait(0.05)
                continue
            for notice in beat.notifications:
                seq = max(seq, notice.seq)
                key = (beat.leader_term, notice.checkpoint_id)
                if notice.type == "trigger":
                    self.triggered.append(key)
                    if self.acking.is_set():
                        self._ack(notice.checkpoint_id)
                    else:
                        self.held.append(key)
                elif notice.type == "complete":
                    self.completed.append(key)
                else:
                    self.aborted.append((*key, notice.reason or ""))
            self._stop.wait(0.05)

    def _ack(self, checkpoint_id: int) -> None:
        acks = [
            (op.uid, i, keyed_state(i, op.parallelism))
            for op in self.graph.operators
            for i in range(op.parallelism)
        ]
        try:
            self.client.acknowledge(self.graph.job_id, checkpoint_id, acks)
        except ClientError as exc:  # e.g. the checkpoint died with the old leader
            self.ack_errors.append(f"ack {checkpoint_id}: {exc}")


def wait_leader(replicas: list[ReplicaProcess], timeout: float = 90) -> ReplicaProcess:
    """The one live replica that leads and is ready (by its own HTTP answer). Generous: a
    replica process alone takes 10-25 s to start on a loaded 2-core machine."""

    def find() -> ReplicaProcess | None:
        leading = []
        for r in replicas:
            if not r.alive():
                continue
            view = r.leader_view()
            if view and view["this"]["state"] == "leader" and view["this"]["ready"]:
                leading.append(r)
        return leading[0] if len(leading) == 1 else None

    return wait_until(find, timeout=timeout, message="exactly one ready leader", interval=0.05)


def wait_follower(
    replicas: list[ReplicaProcess], leader: ReplicaProcess, timeout: float = 90
) -> ReplicaProcess:
    """A live replica besides ``leader`` that answers as a follower. A leader elected says
    nothing of the others: a replica that started late (a loaded machine) may still be
    bringing its HTTP server up."""

    def find() -> ReplicaProcess | None:
        return next(
            (r for r in replicas if r is not leader and r.alive() and r.state() == "follower"),
            None,
        )

    return wait_until(find, timeout=timeout, message="a follower that answers", interval=0.05)


def now() -> float:
    return time.monotonic()
