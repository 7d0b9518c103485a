"""docs/production.md, run as written.

The blocks marked ``<!-- production-test: NAME -->`` are taken from the page and run by
bash in the order :data:`RUN_ORDER` names them, with the test's own addresses instead of
the page's first block: coordinators from the image in containers (podman, on a network
of the test's own; auth and TLS on), ZooKeeper in a container, a real HDFS, a Spark
Master and two Workers (real JVMs, each Worker in its own network namespace), the page's
pipeline file packed with ``sparkpoint package`` and submitted with the real
``spark-submit``, a standby driver beside it. Mid-run a Worker is killed, then the leading
coordinator's container, then the active driver (its JVM and Python, SIGKILL); the
standby takes the job over and reads the bounded input to its end. The output is exactly
once and every checkpoint ZooKeeper retains is whole on HDFS. (The page's stop,
upgrade and roll blocks are not marked: not run here yet.)

The only rewrites: the addresses block is not run (the test sets the same names), the
pipeline file's namenode address, and ``--name sparkpoint --network host`` of the
coordinator blocks, since the test's three "hosts" are containers on one machine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shlex
import signal
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.examples.clicks import expected_output
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.devcluster.hdfs import FS_SHELL_MAIN, LocalHdfs
from sparkpoint.ops.devcluster.zookeeper import server_mode
from sparkpoint.pipeline import TransactionalFileSink
from sparkpoint.storage import CheckpointStorage
from tests.helm.podman import COORDINATOR_IMAGE, Network, Podman, Pods, zookeeper_pod
from tests.pipeline import processes as driver_processes
from tests.pipeline import support
from tests.support.certs import CertificateAuthority
from tests.support.hdfs import own_cluster
from tests.support.pipeline_venv import ROOT, pipeline_venv
from tests.support.standalone import StandaloneCluster
from tests.support.waiting import wait_until

GUIDE = ROOT / "docs" / "production.md"
MARKED = re.compile(r"^<!-- production-test: ([\w-]+) -->\n```(\w+)\n(.*?)^```", re.S | re.M)
#: Every marked block, in the order the test runs them.
RUN_ORDER = [
    "addresses", "coordinator-config", "coordinator-files", "client-files",
    "coordinator-run", "leader", "pipeline-file", "package", "spark-defaults", "submit",
    "standby",
]  # fmt: skip
#: What the addresses block names, which the test sets to its own.
ADDRESSES = ["ZOOKEEPER", "NAMENODE", "SPARK_MASTER", "COORDINATORS", "IMAGE", "ETC", "CLIENT"]
ON_HOST = "--name sparkpoint --network host"
JOB = "clicks"
PORT = 8081


def guide_blocks() -> dict[str, str]:
    blocks: dict[str, str] = {}
    for name, _, body in MARKED.findall(GUIDE.read_text()):
        assert name not in blocks, f"two blocks marked {name}"
        blocks[name] = body
    return blocks


def test_the_guide_marks_the_blocks_the_test_runs() -> None:
    blocks = guide_blocks()
    assert list(blocks) == RUN_ORDER
    assigned = re.findall(r"^([A-Z_]+)=", blocks["addresses"], re.M)
    assert assigned == ADDRESSES
    assert ON_HOST in blocks["coordinator-run"]


# -- the pieces ---------------------------------------------------------------------


@dataclass
class Shell:
    """Runs the guide's blocks one after another as one shell session would: each
    block's variables (``set -a``: all exported) carry over to the next."""

    cwd: Path
    env: dict[str, str]
    log: list[str] = field(default_factory=list)

    def run(self, script: str, *, timeout: float = 600, **extra: str) -> str:
        dump = self.cwd / ".env-after"
        wrapped = f"set -euo pipefail -a\n{script}\nenv -0 > {shlex.quote(str(dump))}\n"
        done = subprocess.run(
            ["bash", "-c", wrapped], env={**self.env, **extra}, cwd=self.cwd,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        output = done.stdout + done.stderr
        self.log.append(f"$ {script}\n{output}")
        assert done.returncode == 0, f"{script}\nexit {done.returncode}:\n{output}"
        carried = dict(
            entry.split("=", 1) for entry in dump.read_text().split("\0") if "=" in entry
        )
        self.env = {k: v for k, v in carried.items() if k not in extra}
        return done.stdout

    def popen(self, script: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", "-c", f"set -euo pipefail -a\n{script}"], env=self.env, cwd=self.cwd,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip


@dataclass
class Coordinators:
    podman: Podman
    network: str
    ips: list[str]

    def name(self, i: int) -> str:
        return f"sparkpoint-{self.network}-{i}"

    def on_host(self, i: int) -> str:
        """What ``--name sparkpoint --network host`` stands for on the test's host i."""
        return f"--name {self.name(i)} --network {self.network} --ip {self.ips[i]}"

    def leaders(self, ca: Path) -> list[int]:
        found = []
        trust = ssl.create_default_context(cafile=str(ca))
        for i, ip in enumerate(self.ips):
            try:
                page = httpx.get(f"https://{ip}:{PORT}/metrics", verify=trust, timeout=2).text
            except httpx.HTTPError:
                continue
            if "\nsparkpoint_is_leader 1.0" in page:
                found.append(i)
        return found

    def remove(self, logs: Path) -> None:
        """Remove the containers, their logs kept in ``logs`` (for a failure's reader)."""
        for i in range(len(self.ips)):
            with (logs / f"{self.name(i)}.log").open("w") as out:
                state = self.podman.state(self.name(i)).get("State", {})
                out.write(f"state: {state}\n")
                subprocess.run([self.podman.exe, "logs", self.name(i)], env=self.podman.env,
                               stdout=out, stderr=subprocess.STDOUT, check=False)  # fmt: skip
            self.podman("rm", "--force", "--time", "1", self.name(i), check=False)


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    podman = Podman(tmp_path_factory.mktemp("podman"))
    podman.build_images()
    return podman


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    # Two cores a Worker: the active and the standby driver each get an executor on both.
    cluster = StandaloneCluster(tmp_path / "spark", first_subnet=41)
    try:
        yield cluster.start(2, cores=2, memory="2g")
    finally:
        cluster.stop()


@pytest.fixture
def hdfs(tmp_path: Path, spark_cluster: StandaloneCluster) -> Iterator[LocalHdfs]:
    with own_cluster(
        tmp_path / "hdfs", host=spark_cluster.address, datanodes=2, replication=2
    ) as cluster:
        for args in (["-mkdir", "-p", "/sparkpoint", "/pipelines"],
                     ["-chown", "sparkpoint", "/sparkpoint", "/pipelines"]):  # fmt: skip
            done = cluster.run_tool(FS_SHELL_MAIN, *args)
            assert done.returncode == 0, done.stderr.decode()
        yield cluster


@pytest.fixture
def network(podman: Podman) -> Iterator[Network]:
    network = Network(podman, f"sp-guide-{uuid.uuid4().hex[:6]}")
    try:
        yield network
    finally:
        network.remove()


@pytest.fixture
def zookeeper(podman: Podman, network: Network, tmp_path: Path) -> Iterator[str]:
    pods = Pods(podman, network, tmp_path)
    ip = network.address()
    try:
        pods.play(zookeeper_pod(f"zk-{uuid.uuid4().hex[:8]}"), ip=ip)
        wait_until(lambda: server_mode(ip, 2181), timeout=120, message="ZooKeeper serving")
        yield f"{ip}:2181"
    finally:
        pods.remove_all()


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def load_pipeline_file(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("guide_pipeline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def submit_words(shell: Shell, block: str) -> list[str]:
    """The words of the block's spark-submit line as the shell expands them, up to the
    pipeline (without ``setsid``, the run options and the redirection)."""
    line = block.split(" > ", 1)[0].removeprefix("setsid ")
    words = shell.run(f"printf '%s\\0' {line}").split("\0")
    return words[: words.index("my_pipeline:pipeline") + 1]


# -- the guide, run -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_production_guide_runs_as_written(
    tmp_path: Path,
    podman: Podman,
    network: Network,
    zookeeper: str,
    spark_cluster: StandaloneCluster,
    hdfs: LocalHdfs,
) -> None:
    blocks = guide_blocks()
    home = tmp_path / "home"
    etc, client = tmp_path / "etc-sparkpoint", home / "sparkpoint"
    etc.mkdir()
    ips = [network.address() for _ in range(3)]
    coordinators = Coordinators(podman, network.name, ips)
    # The CA and a certificate for the three coordinator addresses (the guide: yours).
    ca = CertificateAuthority(tmp_path / "ca", "guide")
    issued = ca.issue("coordinators", addresses=tuple(ips))
    (etc / "ca.crt").write_bytes(ca.cert.read_bytes())
    (etc / "tls.crt").write_bytes(issued.cert.read_bytes())
    (etc / "tls.key").write_bytes(issued.key.read_bytes())
    pipeline_venv(home / "clicks-env", extras=("pipeline",))
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    suite_defaults = Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf"
    (conf_dir / "spark-defaults.conf").write_text(
        suite_defaults.read_text() if suite_defaults.exists() else ""
    )
    work = tmp_path / "submit"
    work.mkdir()
    shell = Shell(work, {
        "PATH": os.pathsep.join([str(home / "clicks-env" / "bin"),
                                 str(Path(podman.exe).parent), os.environ["PATH"]]),
        "HOME": str(home),
        "CONTAINERS_CONF": podman.env["CONTAINERS_CONF"],
        "SPARK_CONF_DIR": str(conf_dir),
        # The driver binds and advertises the address the executors' namespaces reach.
        "SPARK_LOCAL_IP": spark_cluster.address,
        "ZOOKEEPER": zookeeper,
        "NAMENODE": hdfs.http_address,
        "SPARK_MASTER": spark_cluster.master_url,
        "COORDINATORS": ",".join(f"{ip}:{PORT}" for ip in ips),
        "IMAGE": COORDINATOR_IMAGE,
        "ETC": str(etc),
        "CLIENT": str(client),
    })  # fmt: skip
    processes: list[int] = []
    observer = ZooKeeperConnection(ZooKeeperSettings(quorum=zookeeper, cluster_id="prod"))
    try:
        # 1. The coordinators.
        shell.run(blocks["coordinator-config"])
        shell.run(blocks["coordinator-files"])
        shell.run(blocks["client-files"])
        for i, ip in enumerate(ips):
            on_host = blocks["coordinator-run"].replace(ON_HOST, coordinators.on_host(i))
            shell.run(on_host, HOST=ip)
        wait_until(lambda: len(coordinators.leaders(etc / "ca.crt")) == 1, timeout=180,
                   message="one coordinator leads")  # fmt: skip
        assert shell.run(blocks["leader"]).startswith("leader ")
        observer.start()

        # 2-3. The pipeline file and its packed environment.
        pipeline_file = work / "my_pipeline.py"
        pipeline_file.write_text(
            blocks["pipeline-file"].replace("namenode:9870", hdfs.http_address)
        )
        printed = shell.run(blocks["package"])
        assert (work / "clicks-env.tar.gz").is_file()
        # What `sparkpoint package` printed is the guide's submit line.
        assert shlex.split(printed) == submit_words(shell, blocks["submit"])

        # 4-5. Submit, and a standby beside it.
        shell.run(blocks["spark-defaults"])
        shell.run(blocks["submit"])
        processes.append(active := int(shell.env["ACTIVE_PID"]))
        wait_until(
            lambda: support.retained(observer, JOB), timeout=300,
            message="a checkpoint of the job on HDFS",
        )  # fmt: skip
        shell.run(blocks["standby"])
        processes.append(int(shell.env["STANDBY_PID"]))
        wait_until(
            lambda: driver_processes.standby_registered(observer, JOB), timeout=300,
            message="the standby registered",
        )  # fmt: skip

        def progress_after(latest: int, what: str) -> int:
            return wait_until(
                lambda: (ids := support.retained(observer, JOB)) and max(ids) > latest
                and max(ids),
                timeout=300, message=what,
            )  # fmt: skip

        # The kills: a Worker, the leading coordinator, the active driver.
        latest = max(support.retained(observer, JOB))
        spark_cluster.workers[0].kill()
        latest = progress_after(latest, "checkpoints completing without the Worker")
        [leader] = coordinators.leaders(etc / "ca.crt")
        podman("kill", "--signal", "KILL", coordinators.name(leader))
        latest = progress_after(latest, "a checkpoint completed by the next leader")
        kill_group(active)
        progress_after(latest, "the standby driver's checkpoints")

        # The standby, now the job's driver, reads the bounded input to its end.
        standby_log = work / "standby.log"
        wait_until(
            lambda: "job clicks: finished:" in standby_log.read_text(errors="replace"),
            timeout=600, message="the standby driver finished the job",
        )  # fmt: skip
    finally:
        for pid in processes:
            kill_group(pid)
        # The containers' logs: in the test's directory, or $GUIDE_LOGS (pytest deletes
        # older test directories when other sessions run beside this one).
        coordinators.remove(Path(os.environ.get("GUIDE_LOGS", tmp_path)))
        observer.close()

    # Exactly once, across the kills and the savepoint; checkpoints whole on HDFS.
    module = load_pipeline_file(pipeline_file)
    [source_input] = module.pipeline.inputs
    committed = TransactionalFileSink(module.pipeline.sink_op.directory).committed_lines()
    assert sorted(committed) == sorted(expected_output(source_input.source.all_records()))
    storage = CheckpointStorage(f"webhdfs://{hdfs.http_address}/sparkpoint/checkpoints")
    with ZooKeeperConnection(ZooKeeperSettings(quorum=zookeeper, cluster_id="prod")) as after:
        support.assert_hdfs_matches_zookeeper(storage, after, JOB)
