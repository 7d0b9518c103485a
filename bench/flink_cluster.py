"""A real Apache Flink session cluster with ZooKeeper HA, for measuring beside sparkpoint.

Flink's own jars come from the `apache-flink-libraries` wheel (the `flink-bench` dependency
group); the JobManagers and the TaskManager run as plain `java` processes with Flink's
classpath and the JVM sizes Flink's own launcher computes (BashJavaUtils), so no Flink
scripts or downloads are needed. The anchor job (bench/flink/RunningSum.java) is compiled
with `javac` at bench time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sparkpoint.ops.devcluster.zookeeper import free_port

JOB_SOURCE = Path(__file__).with_name("flink") / "RunningSum.java"
ENTRYPOINT = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASK_MANAGER = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
JAVA17_OPENS = [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect",
        "java.text", "java.time", "java.util", "java.util.concurrent",
        "java.util.concurrent.atomic", "java.util.concurrent.locks",
    )
] + ["--add-exports=java.base/sun.net.util=ALL-UNNAMED"]  # fmt: skip
LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = FILE
appender.file.fileName = ${sys:log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{HH:mm:ss,SSS} %-5p %-40c{1} - %m%n
"""


class FlinkUnavailable(RuntimeError):
    """Flink's distribution or a JDK is missing: the bench says how to get it."""


def flink_home() -> Path:
    """$FLINK_HOME if set (any Flink 2.x distribution), else the one inside the installed
    `apache-flink-libraries` wheel."""
    if os.environ.get("FLINK_HOME"):
        return Path(os.environ["FLINK_HOME"])
    try:
        import pyflink  # the wheel's top-level package: lib/, opt/, bin/
    except ImportError as exc:
        raise FlinkUnavailable(
            "Apache Flink's jars are missing: run `uv sync --group flink-bench` "
            "(installs the apache-flink-libraries wheel)"
        ) from exc
    home = Path(next(iter(pyflink.__path__)))
    if not (home / "lib").is_dir():
        raise FlinkUnavailable(f"no lib/ in {home}: is apache-flink-libraries installed?")
    return home


def build_job(home: Path, work: Path, source: Path = JOB_SOURCE) -> Path:
    """Compile an anchor job (default: the failover bench's) against Flink's jars; return
    the jar."""
    for tool in ("javac", "jar"):
        if shutil.which(tool) is None:
            raise FlinkUnavailable(f"`{tool}` not found: the Flink anchor needs a JDK 17")
    classes = work / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", f"{home / 'lib'}/*", str(source)], check=True
    )
    jar = work / f"{source.stem}.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "sparkpointbench"], check=True)
    return jar


@dataclass
class JobManager:
    index: int
    rest_port: int
    rpc_port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def log_name(self) -> str:
        """One log per start, so an earlier life's leadership is never read as current."""
        return f"jobmanager-{self.index}-{self.starts}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"


@dataclass
class FlinkCluster:
    """Two JobManagers and one TaskManager with ZooKeeper HA (Flink's defaults otherwise)."""

    home: Path
    work: Path
    quorum: str
    session_timeout_s: float
    job_managers: list[JobManager] = field(default_factory=list)
    task_manager: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.conf = self.work / "conf"
        self.conf.mkdir(parents=True, exist_ok=True)
        (self.work / "log").mkdir(exist_ok=True)
        self.job_managers = [JobManager(i, free_port(), free_port()) for i in range(2)]
        self._write_config()

    def _write_config(self) -> None:
        root = f"/flink-bench-{os.getpid()}-{int(time.time())}"
        session_ms = int(self.session_timeout_s * 1000)
        (self.conf / "config.yaml").write_text(
            "high-availability:\n"
            "  type: zookeeper\n"
            f"  storageDir: file://{self.work / 'ha'}\n"
            "  zookeeper:\n"
            f"    quorum: {self.quorum}\n"
            f"    path.root: {root}\n"
            f"    client.session-timeout: {session_ms} ms\n"
            "execution:\n"
            "  checkpointing:\n"
            f"    dir: file://{self.work / 'checkpoints'}\n"
            "jobmanager:\n"
            "  bind-host: 127.0.0.1\n"
            "  rpc.address: 127.0.0.1\n"
            "  memory.process.size: 800m\n"
            "taskmanager:\n"
            "  bind-host: 127.0.0.1\n"
            "  host: 127.0.0.1\n"
            "  numberOfTaskSlots: 1\n"
            "  memory.process.size: 1024m\n"
            "rest:\n"
            "  address: 127.0.0.1\n"
            "  bind-address: 127.0.0.1\n"
        )
        (self.conf / "log4j.properties").write_text(LOG4J)

    def _resource_params(self, which: str) -> tuple[list[str], list[str]]:
        """Flink's own launcher arithmetic: JVM sizes and the dynamic properties."""
        out = subprocess.run(
            ["java", "-cp", f"{self.home / 'bin' / 'bash-java-utils.jar'}:{self.home / 'lib'}/*",
             "org.apache.flink.runtime.util.bash.BashJavaUtils", which,
             "--configDir", str(self.conf)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        results = [line.split(":", 1)[1] for line in out.splitlines()
                   if line.startswith("BASH_JAVA_UTILS_EXEC_RESULT:")]  # fmt: skip
        jvm, dynamic = results[-2].split(), results[-1].split()
        return jvm, dynamic

    def _java(self, jvm: list[str], main: str, log_name: str, args: list[str]) -> list[str]:
        log_file = self.work / "log" / f"{log_name}.log"
        return [
            "java", *jvm, *JAVA17_OPENS,
            f"-Dlog.file={log_file}",
            f"-Dlog4j.configurationFile=file:{self.conf / 'log4j.properties'}",
            "-cp", f"{self.home / 'lib'}/*", main, "--configDir", str(self.conf), *args,
        ]  # fmt: skip

    def start_job_manager(self, jm: JobManager) -> None:
        jvm, dynamic = self._resource_params("GET_JM_RESOURCE_PARAMS")
        args = [*dynamic, "-D", f"rest.port={jm.rest_port}",
                "-D", f"high-availability.jobmanager.port={jm.rpc_port}",
                "--executionMode", "cluster", "--host", "127.0.0.1"]  # fmt: skip
        jm.starts += 1
        jm.process = self._spawn(self._java(jvm, ENTRYPOINT, jm.log_name, args))

    def start(self, timeout: float = 120.0) -> None:
        for jm in self.job_managers:
            self.start_job_manager(jm)
        jvm, dynamic = self._resource_params("GET_TM_RESOURCE_PARAMS")
        self.task_manager = self._spawn(self._java(jvm, TASK_MANAGER, "taskmanager", dynamic))
        wait_until(lambda: self._overview(self.job_managers[0]) is not None, timeout,
                   "Flink's REST endpoint to answer")  # fmt: skip

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self.work, start_new_session=True,
        )  # fmt: skip

    def _overview(self, jm: JobManager) -> dict[str, object] | None:
        try:
            response = httpx.get(f"{jm.url}/overview", timeout=2.0)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    def submit(self, jar: Path, records_per_second: int, checkpoint_ms: int) -> str:
        jm = self.job_managers[0]
        wait_until(lambda: (self._overview(jm) or {}).get("slots-total", 0) >= 1, 120.0,
                   "the TaskManager to register")  # fmt: skip
        with jar.open("rb") as handle:
            upload = httpx.post(
                f"{jm.url}/jars/upload",
                timeout=60.0,
                files={"jarfile": (jar.name, handle, "application/x-java-archive")},
            )
        upload.raise_for_status()
        jar_id = upload.json()["filename"].rsplit("/", 1)[-1]
        run = httpx.post(
            f"{jm.url}/jars/{jar_id}/run", timeout=120.0,
            json={"entryClass": "sparkpointbench.RunningSum",
                  "programArgsList": [str(records_per_second), str(checkpoint_ms)]},
        )  # fmt: skip
        run.raise_for_status()
        return str(run.json()["jobid"])

    def leader(self) -> JobManager:
        """The JobManager whose Dispatcher leads (its RPC port is in the leader's address)."""
        pattern = re.compile(r"granted leadership|was granted leadership", re.IGNORECASE)
        for jm in self.job_managers:
            if jm.process is None or jm.process.poll() is not None:
                continue
            log_file = self.work / "log" / f"{jm.log_name}.log"
            log = log_file.read_text(errors="replace") if log_file.exists() else ""
            grants = [m.start() for m in pattern.finditer(log)]
            revokes = [m.start() for m in re.finditer(r"revoked leadership", log)]
            if grants and (not revokes or revokes[-1] < grants[-1]):
                return jm
        raise RuntimeError("no Flink JobManager has leadership")

    def latest_completed(self, jm: JobManager, job_id: str) -> dict[str, object] | None:
        try:
            response = httpx.get(f"{jm.url}/jobs/{job_id}/checkpoints", timeout=2.0)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        latest = response.json().get("latest") or {}
        completed = latest.get("completed")
        return completed if isinstance(completed, dict) else None

    def kill(self, jm: JobManager) -> None:
        assert jm.process is not None
        os.killpg(jm.process.pid, signal.SIGKILL)
        jm.process.wait()

    def stop(self) -> None:
        processes = [jm.process for jm in self.job_managers] + [self.task_manager]
        for process in processes:
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def wait_until(condition, timeout: float, what: str, every: float = 0.05):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


@contextmanager
def flink_cluster(work: Path, quorum: str, session_timeout_s: float) -> Iterator[FlinkCluster]:
    cluster = FlinkCluster(flink_home(), work, quorum, session_timeout_s)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
