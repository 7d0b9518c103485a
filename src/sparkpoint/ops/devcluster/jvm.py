"""The JVM software the project runs beside Python: declared here, pinned, fetched once.

Every JVM artifact set (Hadoop for a real HDFS; Kafka and the connectors of the engines
measured beside sparkpoint follow) is listed in `ARTIFACT_SETS` with exact versions. The
first use fetches a set with Maven (`dependency:copy-dependencies`, checksums enforced)
into a cache directory named after the set and a digest of its pinned coordinates, so a
version bump fetches anew and an unchanged set is never fetched twice. An environment
variable per set points at an existing installation instead (for example
``SPARKPOINT_HADOOP_HOME`` at an unpacked Hadoop distribution).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.ops.devcluster import tool_cache

CACHE_ENV = "SPARKPOINT_JVM_CACHE"
_COMPLETE = ".complete"


class JvmArtifactsError(RuntimeError):
    """A set is unknown, Maven is missing, or the fetch failed; the message says which."""


@dataclass(frozen=True)
class ArtifactSet:
    name: str
    purpose: str
    artifacts: tuple[str, ...]  # group:artifact:version, transitive runtime deps included
    home_env: str  # names an existing installation whose jars are used instead
    home_jar_globs: tuple[str, ...]  # where the jars sit inside such an installation

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(sorted(self.artifacts)).encode()).hexdigest()[:12]


HADOOP_VERSION = "3.4.2"
KAFKA_VERSION = "4.3.1"  # KRaft only; runs on Java 17
SPARK_KAFKA_VERSION = "4.2.0"  # the newest served; 4.3.0 is not on Maven Central here
FLINK_KAFKA_CONNECTOR = "5.0.0-2.2"  # the newest connector of the Flink 2.x line

ARTIFACT_SETS: dict[str, ArtifactSet] = {
    s.name: s
    for s in (
        ArtifactSet(
            name="hadoop",
            purpose="a real HDFS: NameNode and DataNodes from Hadoop's own main classes",
            artifacts=(
                f"org.apache.hadoop:hadoop-hdfs:{HADOOP_VERSION}",
                # the NameNode's classes need the client protocol, which hadoop-hdfs only
                # declares as "provided"
                f"org.apache.hadoop:hadoop-hdfs-client:{HADOOP_VERSION}",
                f"org.apache.hadoop:hadoop-common:{HADOOP_VERSION}",
            ),
            home_env="SPARKPOINT_HADOOP_HOME",
            home_jar_globs=(
                "share/hadoop/common/*.jar",
                "share/hadoop/common/lib/*.jar",
                "share/hadoop/hdfs/*.jar",
                "share/hadoop/hdfs/lib/*.jar",
            ),
        ),
        ArtifactSet(
            name="kafka",
            purpose="a real Kafka broker in KRaft mode, from Kafka's own main classes",
            artifacts=(
                f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
                # Kafka logs through slf4j 1.x; its distribution binds it to log4j 2 so.
                "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4",
            ),
            home_env="SPARKPOINT_KAFKA_HOME",
            home_jar_globs=("libs/*.jar",),
        ),
        ArtifactSet(
            name="spark-kafka",
            purpose="Spark Structured Streaming's Kafka connector, for the Kafka benchmark",
            artifacts=(f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_KAFKA_VERSION}",),
            home_env="SPARKPOINT_SPARK_KAFKA_HOME",
            home_jar_globs=("*.jar",),
        ),
        ArtifactSet(
            name="flink-kafka",
            purpose="Flink's Kafka connector (KafkaSource, exactly-once KafkaSink), for the "
            "Kafka benchmark",
            artifacts=(f"org.apache.flink:flink-connector-kafka:{FLINK_KAFKA_CONNECTOR}",),
            home_env="SPARKPOINT_FLINK_KAFKA_HOME",
            home_jar_globs=("*.jar",),
        ),
    )
}


def cache_root() -> Path:
    return tool_cache.cache_root(CACHE_ENV, "jvm")


def artifact_set(name: str) -> ArtifactSet:
    try:
        return ARTIFACT_SETS[name]
    except KeyError:
        known = ", ".join(sorted(ARTIFACT_SETS))
        raise JvmArtifactsError(f"unknown JVM artifact set {name!r}; known: {known}") from None


def set_directory(name: str) -> Path:
    """Where the set's jars are (or will be) cached."""
    spec = artifact_set(name)
    return cache_root() / f"{spec.name}-{spec.digest}"


def is_fetched(name: str) -> bool:
    spec = artifact_set(name)
    return bool(os.environ.get(spec.home_env)) or (set_directory(name) / _COMPLETE).exists()


def classpath(name: str, *, progress: Callable[[str], None] | None = None) -> list[Path]:
    """The jars of set `name`, fetching them first when the cache does not have them."""
    spec = artifact_set(name)
    home = os.environ.get(spec.home_env)
    if home:
        jars = sorted(j for pattern in spec.home_jar_globs for j in Path(home).glob(pattern))
        if not jars:
            raise JvmArtifactsError(
                f"${spec.home_env}={home} holds no jars under {', '.join(spec.home_jar_globs)}"
            )
        return jars
    target = set_directory(name)
    if not (target / _COMPLETE).exists():
        fetch(name, progress=progress)
    return sorted((target / "jars").glob("*.jar"))


def fetch(name: str, *, progress: Callable[[str], None] | None = None) -> Path:
    """Fetch set `name` into the cache unless it is there; returns its directory.

    Concurrent callers (test workers, a demo beside the tests) wait on one lock, so a set
    is fetched once; the directory appears whole or not at all.
    """
    spec = artifact_set(name)
    target = set_directory(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tool_cache.locked(target.parent / f".{target.name}.lock"):
        if (target / _COMPLETE).exists():
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise JvmArtifactsError(
                f"Maven (mvn) is needed to fetch {spec.name} ({spec.purpose}); install it "
                f"(apt-get install -y maven) or point ${spec.home_env} at an installation"
            )
        say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        say(f"sparkpoint: fetching {spec.name} from Maven Central into {target} (once)")
        with tempfile.TemporaryDirectory(
            dir=target.parent, prefix=f".{spec.name}-", ignore_cleanup_errors=True
        ) as tmp:
            work = Path(tmp)
            (work / "pom.xml").write_text(_pom(spec))
            command = [
                mvn, "--batch-mode", "--quiet", "--strict-checksums", "-f", str(work / "pom.xml"),
                "dependency:copy-dependencies", "-DincludeScope=runtime",
                f"-DoutputDirectory={work / 'jars'}",
            ]  # fmt: skip
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
                raise JvmArtifactsError(f"fetching {spec.name} with Maven failed:\n{tail}")
            (work / _COMPLETE).write_text("\n".join(spec.artifacts) + "\n")
            if target.exists():  # a half-written directory from a killed fetch
                shutil.rmtree(target)
            work.rename(target)
        say(f"sparkpoint: {spec.name} ready ({len(list((target / 'jars').glob('*.jar')))} jars)")
    return target


def _pom(spec: ArtifactSet) -> str:
    deps = []
    for coordinate in spec.artifacts:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    body = "\n".join(deps)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sparkpoint.jvm</groupId>
  <artifactId>{spec.name}</artifactId>
  <version>{spec.digest}</version>
  <packaging>pom</packaging>
  <dependencies>
{body}
  </dependencies>
</project>
"""
