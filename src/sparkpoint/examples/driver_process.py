"""What the example jobs' driver processes share (run_clicks.py, run_orders.py): the
options of a driver process, its channel to a coordinator, its progress lines and the
driver itself, so every example process is set up the one way."""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from sparkpoint.pipeline import (
    CheckpointChannel,
    DriverStatus,
    EmbeddedChannel,
    Pipeline,
    PipelineDriver,
    RestoreMode,
    RunNotice,
)

#: ``report(status, **extra)``: one progress line.
Report = Callable[..., None]


def add_driver_arguments(p: argparse.ArgumentParser) -> None:
    """The options of every example's driver process: checkpoints, progress, Spark,
    restore, and the channel's (:func:`add_channel_arguments`)."""
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--savepoint-dir")
    p.add_argument("--progress")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--parallelism", type=int, default=4)
    p.add_argument("--interval-ms", type=int, default=1000)
    p.add_argument("--restore-from", help="a checkpoint or savepoint directory to start from")
    p.add_argument(
        "--restore-mode",
        choices=[m.value for m in RestoreMode],
        help="who owns the files of --restore-from (default no-claim: the first checkpoint "
        "is a full one of this job's own; claim: only this job's own checkpoints)",
    )
    add_channel_arguments(p)


def add_channel_arguments(p: argparse.ArgumentParser) -> None:
    """The options :func:`make_channel` reads besides the checkpoint settings; every
    driver that uses it takes them from here, so none lacks one."""
    p.add_argument("--coordinator", help="host:port of coordinator replicas, comma-separated")
    p.add_argument(
        "--notices", help="with --coordinator: append every notice received, as JSON lines"
    )
    p.add_argument(
        "--standby",
        action="store_true",
        help="a warm standby driver: wait until the coordinator grants it the job, then go on "
        "from the latest completed checkpoint (needs --coordinator)",
    )


def check_channel_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.standby and not args.coordinator:
        p.error("--standby needs --coordinator: standby drivers are granted by the service")


def notice_log(path: Path) -> Callable[[RunNotice], None]:
    """Append each notice to ``path`` as it arrives (one line, flushed: a killed driver
    leaves every notice it saw)."""

    def record(n: RunNotice) -> None:
        with path.open("a") as f:
            f.write(json.dumps({**n.to_dict(), "pid": os.getpid(),
                                "time": time.time()}) + "\n")  # fmt: skip

    return record


def make_channel(args: argparse.Namespace) -> CheckpointChannel:
    if args.coordinator:
        from sparkpoint.pipeline import BackgroundChannel, RemoteChannel

        remote = RemoteChannel(
            args.coordinator.split(","),
            checkpoint_config={"interval_ms": args.interval_ms},
            on_notice=notice_log(Path(args.notices)) if args.notices else None,
        )
        return BackgroundChannel(remote)
    return EmbeddedChannel(
        args.checkpoint_dir, savepoint_dir=args.savepoint_dir, interval_ms=args.interval_ms
    )


def progress_reporter(
    path: str | None, details: Callable[[DriverStatus], dict[str, Any]] | None = None
) -> Report:
    """``report(status, **extra)`` appends one JSON line to ``path`` (None: writes
    nothing): the driver's epoch, records, restore and last completed checkpoint, the
    job's own ``details``, the time and the process, then ``extra``."""
    progress = Path(path) if path else None

    def report(status: DriverStatus, **extra: Any) -> None:
        if progress is None:
            return
        line = {
            "epoch": status.epoch,
            "records": status.records,
            "restored_from": status.restored_from,
            "last_completed": status.last_completed,
            "rescaling": status.rescaling,
            **(details(status) if details is not None else {}),
            "time": time.time(),
            "pid": os.getpid(),
            **extra,
        }
        with progress.open("a") as f:
            f.write(json.dumps(line) + "\n")

    return report


def make_driver(
    pipeline: Pipeline, spark: Any, args: argparse.Namespace, report: Report
) -> PipelineDriver:
    """The driver of ``pipeline`` as the options say, reporting each epoch; a standby
    reports that it waits."""
    driver = PipelineDriver(
        pipeline,
        spark,
        make_channel(args),
        restore_from=args.restore_from,
        restore_mode=args.restore_mode,
        on_epoch=report,
        standby=args.standby,
    )
    if args.standby:
        report(driver.status, event="standby")
    return driver


def stop_after_this_epoch_on_signal() -> threading.Event:
    """An event set by SIGTERM or a first SIGINT (Ctrl-C): the driver's loop ends after
    the epoch that runs now (``driver.run(until=...)``). A second SIGINT interrupts at
    once. Raising in the middle of an epoch would break off a call into the JVM halfway,
    and py4j's socket would then read half an answer ("reentrant call")."""
    stop = threading.Event()

    def stop_after_this_epoch(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop_after_this_epoch)
    return stop
