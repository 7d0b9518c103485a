"""Coordinator replicas a drill can signal and restart.

Locally started replicas are child processes (``sparkpoint coordinator run``). For a
remote deployment a drill can only signal what it can reach: a replica running on this
machine, found by the process id in its instance id (the default instance id is
``<host>-<pid>``), and restart it only through ``--restart-command``; anything else is
left to the deployment's own supervisor (Kubernetes, systemd), and the drill waits for
the contender to come back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sparkpoint.config import (
    CheckpointingSettings,
    ServiceSettings,
    StoreSettings,
    ZooKeeperSettings,
)
from sparkpoint.devcluster.zookeeper import free_port

_ZK = ZooKeeperSettings()
_CHECKPOINTING = CheckpointingSettings()
_SERVICE = ServiceSettings()


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """What every local replica is started with (``--set`` keys of ``coordinator run``).

    The defaults are the product's own: a drill measures what a deployment gets, not a
    cluster tuned for the drill."""

    session_timeout_s: float = _ZK.session_timeout_s
    renew_interval_s: float = _ZK.lease_renew_interval_s
    takeover_timeout_s: float = _ZK.takeover_timeout_s
    num_retained: int = StoreSettings().max_retained
    tolerable_failed_checkpoints: int = _CHECKPOINTING.tolerable_failures
    # Every failover leaves an orphan: the collector's grace period and scan interval are
    # shortened so that it is collected, or shows as leaked, within the drill (the
    # product's are 10 min and 1 min). Not below half a minute: the checkpoint timeout may
    # not exceed it, and a loaded machine's first epoch of a Spark pipeline takes seconds.
    orphan_grace_s: float = 30.0
    orphan_scan_interval_s: float = 0.5
    # execution.checkpointing.timeout: the service refuses one beyond the grace period, so
    # by default the drill's equals it (None); a drill may set a shorter one.
    checkpoint_timeout_s: float | None = None
    driver_takeover_timeout_s: float = _SERVICE.driver_takeover_timeout_s
    # A slow storage's deletions (the chaos drill's slow-deletions fault); 0: the product's.
    cleanup_delay_s: float = 0.0
    # The jobs' checkpoint timeout (a job that sets none gets it); None: the product's.
    checkpoint_timeout_s: float | None = None

    @property
    def checkpoint_timeout(self) -> float:
        return (
            self.orphan_grace_s if self.checkpoint_timeout_s is None else self.checkpoint_timeout_s
        )

    def as_sets(self) -> dict[str, str]:
        return {
            "high-availability.zookeeper.client.session-timeout": f"{self.session_timeout_s:g} s",
            "high-availability.lease.renew-interval": f"{self.renew_interval_s * 1000:g} ms",
            "high-availability.lease.takeover-timeout": f"{self.takeover_timeout_s:g} s",
            "state.checkpoints.num-retained": str(self.num_retained),
            "state.checkpoints.orphan-cleanup.grace-period": f"{self.orphan_grace_s:g} s",
            "execution.checkpointing.timeout": f"{self.checkpoint_timeout:g} s",
            "state.checkpoints.orphan-cleanup.interval": f"{self.orphan_scan_interval_s:g} s",
            "driver.takeover-timeout": f"{self.driver_takeover_timeout_s:g} s",
            "state.checkpoints.cleanup.delay": f"{self.cleanup_delay_s:g} s",
            # Local child processes on loopback, driven by this process: no tokens.
            "rest.auth.enabled": "false",
            "execution.checkpointing.tolerable-failed-checkpoints": str(
                self.tolerable_failed_checkpoints
            ),
            **({"execution.checkpointing.timeout": f"{self.checkpoint_timeout_s:g} s"}
               if self.checkpoint_timeout_s is not None else {}),
        }  # fmt: skip


@dataclass
class LocalReplica:
    name: str
    directory: Path
    quorum: str
    cluster_id: str
    #: ``state.checkpoints.dir`` / ``state.savepoints.dir``: local paths or HDFS URIs.
    checkpoints_dir: str
    savepoints_dir: str
    settings: ReplicaSettings
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    #: Stopped on purpose at the end (not killed by a fault).
    stopped: bool = False

    @property
    def address(self) -> str:
        return f"http://{self.host_port}"

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> LocalReplica:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "sparkpoint", "coordinator", "run",
            "--zookeeper", self.quorum, "--cluster-id", self.cluster_id,
            "--port", str(self.port),
            "--set", f"high-availability.instance-id={self.name}",
            "--set", f"state.checkpoints.dir={self.checkpoints_dir}",
            "--set", f"state.savepoints.dir={self.savepoints_dir}",
        ]  # fmt: skip
        for key, value in self.settings.as_sets().items():
            command += ["--set", f"{key}={value}"]
        # A session of its own: a Ctrl-C meant for the demo or the drill reaches only them,
        # and they stop the replicas in order.
        with open(self.directory / f"{self.name}.log", "ab") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout: float) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self) -> None:
        """SIGTERM (graceful), then SIGKILL if it does not exit; a frozen one is thawed."""
        if not self.alive():
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not self.wait_exit(15):
            self.signal(signal.SIGKILL)
            self.wait_exit(10)


def local_pid_of(instance_id: str) -> int | None:
    """The process id in a default instance id ``<this host>-<pid>``, if the process runs
    here; None for replicas on other machines or with custom instance ids."""
    host, _, pid = instance_id.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, PermissionError):
        return None
    return int(pid)
