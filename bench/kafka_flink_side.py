"""The Flink 2.3 side of bench/kafka_bench.py: ``bench/flink/KafkaRunningSum.java`` built
into one jar with flink-connector-kafka (the `flink-kafka` set of sparkpoint.ops.devcluster.jvm) and
submitted to the session cluster of ``bench/flink_cluster.py`` (ZooKeeper HA, two
JobManagers); the fault is kill -9 of the leading JobManager, the standby takes over."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from flink_cluster import FlinkCluster, flink_cluster, flink_home, wait_until
from sparkpoint.ops.devcluster.jvm import classpath
from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper

JOB = Path(__file__).with_name("flink") / "KafkaRunningSum.java"
ENTRY = "sparkpointbench.KafkaRunningSum"
#: Connector jars packed into the job jar (Flink's own jars are on the cluster already).
BUNDLED = ("flink-connector-kafka-", "kafka-clients-", "jackson-")


def build_jar(home: Path, work: Path) -> Path:
    connector = classpath("flink-kafka")
    classes = work / "flink-kafka-classes"
    classes.mkdir(parents=True, exist_ok=True)
    cp = ":".join([f"{home / 'lib'}/*", *(str(j) for j in connector)])
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(JOB)], check=True)
    for jar in connector:
        if jar.name.startswith(BUNDLED):
            with zipfile.ZipFile(jar) as z:
                for name in z.namelist():
                    if not name.startswith("META-INF/") or name.startswith("META-INF/services/"):
                        z.extract(name, classes)
    out = work / "kafka-running-sum.jar"
    subprocess.run(["jar", "cf", str(out), "-C", str(classes), "."], check=True)
    shutil.rmtree(classes, ignore_errors=True)
    return out


def submit(cluster: FlinkCluster, jar: Path, args: list[str]) -> str:
    jm = cluster.job_managers[0]
    wait_until(lambda: _slots(jm.url) >= 1, 120.0, "the TaskManager to register")
    with jar.open("rb") as handle:
        upload = httpx.post(
            f"{jm.url}/jars/upload",
            timeout=120.0,
            files={"jarfile": (jar.name, handle, "application/x-java-archive")},
        )
    upload.raise_for_status()
    jar_id = upload.json()["filename"].rsplit("/", 1)[-1]
    run = httpx.post(f"{jm.url}/jars/{jar_id}/run", timeout=120.0,
                     json={"entryClass": ENTRY, "programArgsList": args})  # fmt: skip
    run.raise_for_status()
    return str(run.json()["jobid"])


def _slots(url: str) -> int:
    try:
        return int(httpx.get(f"{url}/overview", timeout=2.0).json().get("slots-total", 0))
    except (httpx.HTTPError, ValueError):
        return 0


def flink_measure(
    kafka: LocalKafka,
    topics: tuple[str, str],
    work: Path,
    args: argparse.Namespace,
    measure: Callable[..., Any],
) -> Any:
    from kafka_bench import Side

    home = flink_home()
    jar = build_jar(home, work)
    with (
        LocalZooKeeper(work / "zookeeper") as zk,
        flink_cluster(work / "flink", zk.connect_string, 5.0) as cluster,
    ):
        program = [kafka.bootstrap, *topics, str(int(args.interval * 1000))]

        def start() -> None:
            submit(cluster, jar, program)

        def kill() -> None:
            cluster.kill(cluster.leader())

        side = Side("flink", start=start, kill=kill, restart=lambda: None, stop=lambda: None)
        return measure(side, kafka, topics, args)
