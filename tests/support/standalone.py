"""A real Spark standalone cluster: a Master and Workers started from pyspark's own
``spark-class``, each Worker in a network namespace of its own (:mod:`tests.support.netns`),
so that its executor is another host on the network, as in production.

Every namespace gets a default route through the host, and the host forwards between
them (IPv4 forwarding is turned on for the cluster's life if it was off): a namespace
reaches the host's services (the Master, the driver, HDFS) at
:attr:`StandaloneCluster.address`, the host-side address of the first namespace's link,
and the executors reach each other (shuffle, cached blocks). Services bound to
127.0.0.1 are out of a namespace's reach: bind them to :attr:`address`.

>>> with standalone_cluster(tmp_path, workers=2) as cluster:   # doctest: +SKIP
...     os.environ["SPARK_LOCAL_IP"] = cluster.address   # the driver binds and advertises it
...     spark = spark_session(cluster.master_url)
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.netns import NetnsHost
from tests.support.waiting import wait_until

MASTER_MAIN = "org.apache.spark.deploy.master.Master"
WORKER_MAIN = "org.apache.spark.deploy.worker.Worker"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
#: The executor's own log lines (Spark's ``Executor``, at INFO) around each task.
_TASK_STARTED = re.compile(r"Executor: Running task .* \(TID (\d+)\)")
_TASK_ENDED = re.compile(
    r"Executor: (?:Finished|Exception in|Executor killed) task .* \(TID (\d+)\)"
)


def spark_home() -> Path:
    """The pyspark package directory: pip's pyspark is a whole Spark (jars, bin/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class Worker:
    netns: NetnsHost
    proc: subprocess.Popen[bytes]
    log: Path
    work_dir: Path

    @property
    def host(self) -> str:
        return self.netns.ns_addr

    def signal(self, sig: int) -> None:
        """Signal the Worker JVM and everything it started (one process group)."""
        os.killpg(self.proc.pid, sig)

    def tasks_in_flight(self) -> set[int]:
        """Task ids its executors began and have not ended, from their logs (the Worker
        copies each executor's stderr to ``<work-dir>/<app>/<executor>/stderr``)."""
        started: set[int] = set()
        ended: set[int] = set()
        for log in self.work_dir.glob("app-*/*/stderr"):
            text = log.read_text(errors="replace")
            started.update(int(tid) for tid in _TASK_STARTED.findall(text))
            ended.update(int(tid) for tid in _TASK_ENDED.findall(text))
        return started - ended

    def wait_registered(self) -> None:
        wait_until(
            lambda: (
                "Successfully registered with master" in self.log.read_text(errors="replace")
                or self.proc.poll() is not None
            ),
            timeout=120,
            message=f"the Worker on {self.host} registers",
        )
        assert self.proc.poll() is None, self.log.read_text()[-4000:]

    def kill(self) -> None:
        """kill -9 the Worker JVM with everything it started (its executor and that
        executor's Python workers): one process group, inside the namespace."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


class StandaloneCluster:
    """A Master on the host and one Worker per namespace; :meth:`stop` ends them all and
    deletes the namespaces, whatever state a test left them in."""

    def __init__(self, work_dir: Path, *, first_subnet: int) -> None:
        self.work_dir = work_dir
        self.first_subnet = first_subnet
        self.namespaces: list[NetnsHost] = []
        self.workers: list[Worker] = []
        self.master: subprocess.Popen[bytes] | None = None
        self.master_port = 0
        self.forwarding_was = IP_FORWARD.read_text().strip()

    @property
    def address(self) -> str:
        """Where the host's services listen for the namespaces."""
        return self.namespaces[0].host_addr

    @property
    def master_url(self) -> str:
        return f"spark://{self.address}:{self.master_port}"

    def environment(self, local_ip: str) -> dict[str, str]:
        """Spark's JVMs bind ``local_ip``; executors run this Python with this
        ``PYTHONPATH`` (an executor inherits its Worker's environment)."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": local_ip,
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        }

    def _spawn(
        self, name: str, command: list[str], local_ip: str
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.work_dir / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.environment(local_ip),
                cwd=self.work_dir,
                start_new_session=True,  # one process group to kill, JVM and children
            )
        return proc, log

    def start(self, workers: int, *, cores: int = 1, memory: str = "1g") -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        IP_FORWARD.write_text("1")  # executor to executor: one namespace to another
        for i in range(workers):
            netns = NetnsHost.create(subnet=self.first_subnet + i)
            self.namespaces.append(netns)
            netns.exec_ip("route", "add", "default", "via", netns.host_addr)
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.master_port = free_port(self.address)
        self.master, master_log = self._spawn(
            "master",
            [spark_class, MASTER_MAIN, "--host", self.address,
             "--port", str(self.master_port), "--webui-port", "0"],
            self.address,
        )  # fmt: skip
        wait_until(
            lambda: (
                "I have been elected leader" in master_log.read_text(errors="replace")
                or self.master is None
                or self.master.poll() is not None
            ),
            timeout=120,
            message="the Spark Master leads",
        )
        assert self.master.poll() is None, master_log.read_text()[-4000:]
        # Both JVMs start at once; each registers as soon as it is up.
        for worker in [self.spawn_worker(n, cores=cores, memory=memory) for n in self.namespaces]:
            worker.wait_registered()
        return self

    def spawn_worker(self, netns: NetnsHost, *, cores: int = 1, memory: str = "1g") -> Worker:
        """Start a Worker in ``netns`` (see :meth:`Worker.wait_registered`)."""
        name = f"worker-{netns.ns_addr}"
        work = self.work_dir / name
        work.mkdir(exist_ok=True)
        spark_class = str(spark_home() / "bin" / "spark-class")
        proc, log = self._spawn(
            name,
            [*netns.prefix, spark_class, WORKER_MAIN, self.master_url,
             "--host", netns.ns_addr, "--webui-port", "0",
             "--cores", str(cores), "--memory", memory, "--work-dir", str(work)],
            netns.ns_addr,
        )  # fmt: skip
        worker = Worker(netns, proc, log, work)
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.kill()
        if self.master is not None and self.master.poll() is None:
            os.killpg(self.master.pid, signal.SIGKILL)
            self.master.wait(timeout=30)
        for netns in self.namespaces:
            # Anything still inside (a stray executor) goes with its namespace.
            pids = subprocess.run(
                ["ip", "netns", "pids", netns.name], capture_output=True, text=True, check=False
            ).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            netns.destroy()
        IP_FORWARD.write_text(self.forwarding_was)


@contextlib.contextmanager
def standalone_cluster(
    work_dir: Path, *, workers: int = 2, first_subnet: int = 31
) -> Iterator[StandaloneCluster]:
    """A Master and ``workers`` Workers (namespaces on subnets ``first_subnet``, …)."""
    cluster = StandaloneCluster(work_dir, first_subnet=first_subnet)
    try:
        yield cluster.start(workers)
    finally:
        cluster.stop()
