"""Spark's JVMs in the tests without the optimising compiler: every Spark driver,
executor, Master and Worker the session starts (in this process or a child) runs with
C1 only and the serial collector.

Why: a test's JVM lives for seconds to minutes on a 2-core machine shared by the drivers,
executors, coordinators and servers of the same test; C2's compiler threads and the
parallel collector spend CPU a short-lived JVM never earns back (measured on 30 small
epochs of a PySpark job in `local[2]`: the JVM's CPU time halved, the wall time the
same). The test ZooKeeper, Kafka and HDFS servers already start this way
(``sparkpoint.ops.devcluster``). Nothing else of Spark's configuration changes.

Through Spark's own mechanism: a ``spark-defaults.conf`` in ``SPARK_CONF_DIR`` (read by
every ``spark-submit``, which PySpark runs to start its driver JVM) and
``SPARK_DAEMON_JAVA_OPTS`` for the standalone daemons. A ``SPARK_CONF_DIR`` already set
(a developer's own) is left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
DEFAULTS = (
    f"spark.driver.extraJavaOptions {QUICK_JVM_OPTIONS}\n"
    f"spark.executor.extraJavaOptions {QUICK_JVM_OPTIONS}\n"
)

_made: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    if "SPARK_CONF_DIR" in os.environ:
        return
    conf_dir = Path(tempfile.mkdtemp(prefix="sparkpoint-test-spark-conf-"))
    (conf_dir / "spark-defaults.conf").write_text(DEFAULTS)
    os.environ["SPARK_CONF_DIR"] = str(conf_dir)
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", QUICK_JVM_OPTIONS)
    _made.append(conf_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    for conf_dir in _made:
        shutil.rmtree(conf_dir, ignore_errors=True)
