"""Run an example job as a process: ``python -m sparkpoint.examples.run_clicks``.

The clicks job by default; ``--example sessions`` runs the sessionization example
instead (event-time session windows over the same generated clicks, made out of order
and partly late; sessions go to ``--output``, late clicks to ``--late-output``). Two
examples with two inputs: ``--example shipments`` (orders joined with shipments within
an interval; late orders and shipments under ``--late-output``) and ``--example fraud``
(payments checked against rules broadcast to every subtask), the second input generated
beside the first (:func:`second_input`).
Used by the process-level tests (kill the driver, kill an executor, kill a coordinator)
and the benchmark. Restores from the newest complete checkpoint under
``--checkpoint-dir`` (or ``--restore-from``), runs the bounded stream to its end, takes
a last checkpoint so all output is committed, and writes one JSON line of progress per
epoch to ``--progress``. With ``--coordinator`` it uses the HA service instead of an
embedded coordinator.
"""

from __future__ import annotations

import argparse
import sys

from sparkpoint.examples.clicks import clicks_pipeline
from sparkpoint.examples.driver_process import (
    add_driver_arguments,
    check_channel_arguments,
    make_driver,
    progress_reporter,
    stop_after_this_epoch_on_signal,
)
from sparkpoint.examples.fraud import fraud_pipeline
from sparkpoint.examples.sessions import OUT_OF_ORDER_MS, sessions_pipeline
from sparkpoint.examples.shipments import OUT_OF_ORDER_MS as SHIPMENTS_OUT_OF_ORDER_MS
from sparkpoint.examples.shipments import shipments_pipeline
from sparkpoint.pipeline import BACKEND_NAMES, ClickEventSource, Pipeline, spark_session

#: ``(out_of_order_ms, late_every)`` of each example's clicks unless given: in order for
#: the clicks job, which does not use event time; out of order and partly late for the
#: sessions, so their watermark and late side output have work to do.
EVENT_TIME_DEFAULTS = {
    "clicks": (0, 0),
    "sessions": (OUT_OF_ORDER_MS, 97),
    "shipments": (SHIPMENTS_OUT_OF_ORDER_MS, 37),
    "fraud": (0, 0),
}
#: The examples whose late records go to ``--late-output``.
WITH_LATE_OUTPUT = ("sessions", "shipments")
#: ``--example fraud``: rules read per epoch (one split).
RULES_PER_EPOCH = 2


def build_source(args: argparse.Namespace) -> ClickEventSource:
    """The clicks the arguments describe (in order unless made otherwise)."""
    return ClickEventSource(
        splits=args.splits,
        users=args.users,
        records_per_epoch=args.records_per_epoch,
        records_per_split=args.records_per_split or None,
        seed=args.seed,
        out_of_order_ms=args.out_of_order_ms or 0,
        late_every=args.late_every or 0,
    )


def settle_example_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the options that depend on ``--example`` and fill in its defaults."""
    if args.late_output and args.example not in WITH_LATE_OUTPUT:
        p.error("--late-output needs --example sessions or shipments: only they have late records")
    out_of_order_ms, late_every = EVENT_TIME_DEFAULTS[args.example]
    if args.out_of_order_ms is None:
        args.out_of_order_ms = out_of_order_ms
    if args.late_every is None:
        args.late_every = late_every
    if args.out_of_order_ms < 0 or args.late_every < 0:
        p.error("--out-of-order-ms and --late-every must not be negative")
    if args.example in WITH_LATE_OUTPUT and not args.late_output:
        args.late_output = f"{args.output}-late"
    args.job_id = args.job_id or args.example


def second_input(args: argparse.Namespace) -> ClickEventSource:
    """The second input of ``--example shipments`` (the shipments: clicks like the
    orders, of another seed) or ``--example fraud`` (the rules: one split,
    :data:`RULES_PER_EPOCH` a epoch, as many epochs as the payments take)."""
    if args.example == "shipments":
        return build_source(argparse.Namespace(**{**vars(args), "seed": args.seed + 4}))
    epochs = -(-args.records_per_split * args.splits // args.records_per_epoch)
    return ClickEventSource(
        splits=1, users=1, records_per_epoch=RULES_PER_EPOCH,
        records_per_split=epochs * RULES_PER_EPOCH or None, seed=args.seed + 6,
    )  # fmt: skip


def build_pipeline(args: argparse.Namespace) -> Pipeline:
    """The example ``--example`` names, over the clicks the arguments describe (after
    :func:`settle_example_arguments`)."""
    source = build_source(args)
    if args.example == "shipments":
        return shipments_pipeline(
            args.job_id, source, second_input(args), args.output, args.late_output,
            parallelism=args.parallelism,
        )  # fmt: skip
    if args.example == "fraud":
        return fraud_pipeline(args.job_id, source, second_input(args), args.output,
                              parallelism=args.parallelism)  # fmt: skip
    if args.example == "sessions":
        return sessions_pipeline(
            args.job_id, source, args.output, args.late_output,
            parallelism=args.parallelism, out_of_order_ms=args.out_of_order_ms,
        )  # fmt: skip
    return clicks_pipeline(args.job_id, source, args.output, parallelism=args.parallelism)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--example",
        choices=tuple(EVENT_TIME_DEFAULTS),
        default="clicks",
        help="clicks: per-user running totals (default); sessions: event-time session "
        "windows with a late-clicks side output; shipments: orders joined with shipments "
        "within an interval (two inputs); fraud: payments checked against broadcast rules",
    )
    p.add_argument("--job-id", help="default: the example's name")
    p.add_argument("--output", required=True)
    p.add_argument(
        "--late-output", help="--example sessions: where late clicks go (default: <output>-late)"
    )
    p.add_argument("--splits", type=int, default=4)
    p.add_argument("--users", type=int, default=500)
    p.add_argument("--records-per-epoch", type=int, default=2000)
    p.add_argument(
        "--records-per-split", type=int, default=10_000, help="0: an endless stream (Ctrl-C stops)"
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--out-of-order-ms",
        type=int,
        help="move each click's timestamp back by up to this much "
        "(default: 0 for clicks, 2000 for sessions)",
    )
    p.add_argument(
        "--late-every",
        type=int,
        help="every n-th click of a split comes ten minutes late; 0: none "
        "(default: 0 for clicks, 97 for sessions)",
    )
    p.add_argument(
        "--state-backend",
        choices=BACKEND_NAMES,
        help="where keyed state lives (default: $SPARKPOINT_STATE_BACKEND, else memory)",
    )
    add_driver_arguments(p)
    p.add_argument(
        "--savepoint-after-epochs",
        type=int,
        help="stop with a savepoint (into --savepoint-dir) after this many epochs",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    check_channel_arguments(parser(), args)
    settle_example_arguments(parser(), args)
    report = progress_reporter(args.progress)
    on_disk = args.state_backend == "rocksdb" or None
    pipeline = build_pipeline(args)
    spark = spark_session(args.master, f"sparkpoint-{args.job_id}", state_in_place=on_disk)
    if args.state_backend:
        pipeline = pipeline.with_state_backend(args.state_backend)
    driver = make_driver(pipeline, spark, args, report)
    interrupted = stop_after_this_epoch_on_signal()
    driver.start()
    report(driver.status, event="started")
    try:
        if args.savepoint_after_epochs is not None:
            driver.run(max_epochs=args.savepoint_after_epochs)
            savepoint = driver.stop_with_savepoint(args.savepoint_dir)
            report(driver.status, event="savepoint", savepoint=savepoint)
        else:
            driver.run(until=lambda _: interrupted.is_set())
            if interrupted.is_set():
                raise KeyboardInterrupt
            if driver.superseded:
                # A newer run of the job registered: stop, committing nothing more.
                report(driver.status, event="superseded", reason=driver.status.superseded)
            else:
                driver.finish()
                report(driver.status, event="finished")
    except KeyboardInterrupt:
        # Ctrl-C: stop where we are. Output of completed checkpoints is committed; the
        # rest is replayed from the last completed checkpoint by the next start.
        report(driver.status, event="interrupted")
    finally:
        driver.close()
        spark.stop()
    print(f"output: {args.output} (committed files: part-*.jsonl)")
    if args.late_output:
        print(f"late records: {args.late_output}")
    print(f"checkpoints: {args.checkpoint_dir if not args.coordinator else 'see the coordinator'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
