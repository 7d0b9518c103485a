"""A pipeline run as an application: ``sparkpoint run my_pipeline:pipeline`` (also
spark-submit's main file, see docs/production.md).

:func:`load_pipeline` finds the pipeline a module defines; :func:`submitted_session`
takes the SparkSession spark-submit configured (its master, its Python, its
``spark-defaults.conf``) rather than setting its own; :func:`run_submitted` drives the
pipeline until its input ends, a stop-with-savepoint completes, or a newer run of the
job takes over.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from sparkpoint.client.credentials import Credentials, read_token_file
from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.channels.background import BackgroundChannel
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.channels.protocol import CheckpointChannel
from sparkpoint.pipeline.channels.remote import RemoteChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from sparkpoint.pipeline.runtime.spark_session import STATE_IN_PLACE
from sparkpoint.pipeline.runtime.status import DriverStatus
from sparkpoint.pipeline.runtime.submit_settings import DriverSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The master of a run that neither spark-submit nor ``--master`` gave one.
DEFAULT_MASTER = "local[2]"


def load_pipeline(spec: str) -> Pipeline:
    """The pipeline ``module:attribute`` names: a :class:`Pipeline`, or a function of no
    arguments that returns one. ValueError, naming what is wrong, otherwise."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{spec!r} is not MODULE:ATTRIBUTE (e.g. my_pipeline:pipeline)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ValueError(
                f"no module {module_name!r} on the Python path (spark-submit: pass its "
                "file with --py-files, or install it into the packed environment)"
            ) from None
        raise
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ValueError(f"module {module_name!r} has no {attribute!r}")
        found = getattr(found, part)
    if callable(found) and not isinstance(found, Pipeline):
        found = found()
    if not isinstance(found, Pipeline):
        raise ValueError(f"{spec} is a {type(found).__name__}, not a sparkpoint Pipeline")
    return found


def spark_conf() -> dict[str, str]:
    """Spark's configuration as spark-submit hands it to the application (its options,
    ``--conf`` and ``spark-defaults.conf``); outside spark-submit, what PySpark's own
    launcher reads (``spark-defaults.conf`` of ``$SPARK_CONF_DIR``)."""
    from pyspark import SparkConf, SparkContext

    # Without the JVM gateway, SparkConf() is an empty Python-side dict: connect to the
    # JVM spark-submit started (or start one, as a session would) before reading.
    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def submitted_session(
    settings: DriverSettings, conf: dict[str, str], master: str | None, app_name: str
) -> SparkSession:
    """The SparkSession of a submitted pipeline: what Spark's configuration says, with
    only the gaps filled — the master (``master``, else :data:`DEFAULT_MASTER`), the
    executors' Python (this one, for a run on one machine) and the application's name —
    plus what the rocksdb backend needs to keep tasks with their stores."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if master is not None or "spark.master" not in conf:
        builder = builder.master(master or DEFAULT_MASTER)
    if "spark.pyspark.python" not in conf and "PYSPARK_PYTHON" not in os.environ:
        # PySpark's driver takes its workers' Python from the environment (spark-submit
        # sets it from spark.pyspark.python): this one, which has sparkpoint.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = builder.config("spark.pyspark.python", sys.executable)
    if "spark.ui.showConsoleProgress" not in conf:
        builder = builder.config("spark.ui.showConsoleProgress", "false")  # logs, not a bar
    if "spark.app.name" not in conf:
        builder = builder.appName(app_name)
    if settings.state_backend == "rocksdb":
        for key, value in STATE_IN_PLACE.items():
            builder = builder.config(key, value)
    return builder.getOrCreate()


def checkpoint_channel(settings: DriverSettings) -> CheckpointChannel:
    """The coordinator service's (token and CA from the settings, else from the
    environment), or an embedded coordinator keeping checkpoints in ``checkpoint_dir``."""
    if not settings.addresses:
        assert settings.checkpoint_dir is not None  # checked by the settings
        return EmbeddedChannel(
            settings.checkpoint_dir,
            savepoint_dir=settings.savepoint_dir,
            interval_ms=settings.interval_ms,
        )
    credentials = Credentials.from_env()
    if settings.token_file is not None:
        credentials = replace(credentials, token=read_token_file(settings.token_file))
    if settings.ca_file is not None:
        credentials = replace(credentials, ca_file=settings.ca_file)
    remote = RemoteChannel(
        settings.addresses,
        checkpoint_config={"interval_ms": settings.interval_ms},
        credentials=credentials,
    )
    return BackgroundChannel(remote)


class Terminated(Exception):
    """SIGTERM: stop as Ctrl-C does (a cluster manager's kill of the application)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def run_submitted(
    pipeline: Pipeline,
    spark: SparkSession,
    settings: DriverSettings,
    report: Callable[..., None],
) -> tuple[str, DriverStatus]:
    """Drive ``pipeline`` to its end; returns the driver's status and how it ended:
    ``finished`` (the input ended and a last checkpoint committed everything),
    ``stopped`` (a stop-with-savepoint completed), ``superseded`` (a newer run of the job
    registered) or ``interrupted`` (Ctrl-C or SIGTERM: the next run goes on from the last
    completed checkpoint). ``report(status, event=...)`` sees every epoch and each of these."""
    if settings.state_backend:
        pipeline = pipeline.with_state_backend(settings.state_backend)
    driver = PipelineDriver(
        pipeline,
        spark,
        checkpoint_channel(settings),
        restore_from=settings.restore_from,
        restore_mode=settings.restore_mode,
        on_epoch=report,
        standby=settings.standby,
    )
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        if settings.standby:
            report(driver.status, event="standby")
        driver.start()
        report(driver.status, event="started")
        driver.run()
        outcome = ending(driver)
        if outcome == "finished":
            finish(driver, remote=bool(settings.addresses))
    except (KeyboardInterrupt, Terminated):
        outcome = "interrupted"
    finally:
        signal.signal(signal.SIGTERM, previous)
        driver.close()
    report(driver.status, event=outcome)
    return outcome, driver.status


def finish(driver: PipelineDriver, *, remote: bool, timeout_s: float = 300.0) -> None:
    """Commit everything read: a last completed checkpoint taken after the input ended.

    Embedded, the driver triggers it. With coordinators, triggering one is an operator's
    call, which a driver's token may not make (docs/security.md): the driver waits
    instead for the next periodic checkpoint it snapshots from here on — one with an id
    above every checkpoint it has acknowledged, declined or seen end so far."""
    if not remote:
        driver.finish()
        return
    status = driver.status
    seen = [*status.completed, *status.acknowledged]
    seen += [cid for cid, _ in (*status.aborted, *status.declined)]
    before = max(seen, default=0)
    deadline = time.monotonic() + timeout_s
    while not any(cid > before for cid in status.completed):
        if driver.stopped:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no checkpoint completed after the input ended in {timeout_s} s")
        if not driver.run_epoch():
            time.sleep(0.02)  # waiting for the coordinator's next trigger
    status.finished = True


def ending(driver: PipelineDriver) -> str:
    if driver.superseded:
        return "superseded"
    return "stopped" if driver.stopped else "finished"


def status_line(status: DriverStatus, outcome: str) -> str:
    """One line for the log: how the run ended; after a stop, the savepoint to start
    the next version from."""
    line = (
        f"{outcome}: epoch {status.epoch}, {status.records} records, last completed "
        f"checkpoint {status.last_completed}"
    )
    if outcome == "stopped" and status.savepoints:
        line += f"; savepoint {status.savepoints[max(status.savepoints)]}"
    return line
