"""A SparkSession for pipelines: executors run this very Python (so they import
sparkpoint and the job's module), the UI is off and shuffles are small."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: Keep each subtask's tasks on the executor that holds its state (the cached state
#: partition, or the on-disk backend's store): the record side of an epoch's union must
#: not outvote the state side's location (reduce locality off), and a task waits for its
#: state's executor or host rather than run elsewhere (a lost executor takes its cached blocks,
#: and with them this preference, along).
STATE_IN_PLACE = {
    "spark.shuffle.reduceLocality.enabled": "false",
    "spark.locality.wait.process": "10min",
    "spark.locality.wait.node": "10min",
}


def spark_session(
    master: str = "local[2]",
    app_name: str = "sparkpoint",
    *,
    state_in_place: bool | None = None,
    **conf: str,
) -> SparkSession:
    """Get or create a session; ``conf``: more Spark settings by their own names,
    e.g. ``spark_session(**{"spark.task.maxFailures": "8"})``. ``state_in_place``: add
    :data:`STATE_IN_PLACE` (what the rocksdb state backend needs); by default when
    ``$SPARKPOINT_STATE_BACKEND`` is ``rocksdb``."""
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "the pipeline runtime needs pyspark: install sparkpoint[pipeline]"
        ) from e

    # Python workers must be this interpreter: the system python3 has no sparkpoint.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # A local run talks only to itself: keep Spark's driver and executors on loopback
        # rather than whatever address the host name resolves to.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.pyspark.python", sys.executable)
    )
    if state_in_place is None:
        from sparkpoint.pipeline.state.backend import default_state_backend

        state_in_place = default_state_backend().on_disk
    for key, value in STATE_IN_PLACE.items() if state_in_place else ():
        builder = builder.config(key, value)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
