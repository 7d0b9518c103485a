"""`sparkpoint run MODULE:ATTRIBUTE`: run the pipeline a module defines as its driver.

The same command is spark-submit's main file (sparkpoint's ``__main__.py``; docs/
production.md). Every option is also the Spark setting ``spark.sparkpoint.<option>``
(:mod:`sparkpoint.pipeline.runtime.submit_settings`); options given here win.
"""

from __future__ import annotations

import sys
from typing import Any

import click

#: The options that are also ``spark.sparkpoint.*`` settings: (name, help). Each is
#: declared with no default here, so "not given" (None) lets Spark's setting through.
SETTING_OPTIONS = [
    ("coordinator", "host:port of the coordinator replicas, comma-separated."),
    ("token-file", "A file with the driver's token (else $SPARKPOINT_TOKEN_FILE)."),
    ("ca-file", "Verify the coordinators' TLS certificates against this CA (https)."),
    ("checkpoint-dir", "Without coordinators: an embedded coordinator keeps checkpoints here."),
    ("savepoint-dir", "Without coordinators: the default savepoint directory."),
    ("restore-from", "Start from this checkpoint or savepoint (an upgrade)."),
    ("restore-mode", "no-claim (default) or claim: who owns the files of --restore-from."),
    ("state-backend", "memory or rocksdb (default: the pipeline's own)."),
    ("progress", "Append one JSON line of progress per epoch to this file."),
]


def _with_setting_options(func: Any) -> Any:
    for name, help_text in reversed(SETTING_OPTIONS):
        func = click.option(f"--{name}", default=None, help=help_text)(func)
    func = click.option(
        "--interval-ms", type=int, default=None, help="Checkpoint interval (default 1000)."
    )(func)
    return click.option(
        "--standby/--no-standby",
        default=None,
        help="A warm standby driver: wait until the coordinators grant it the job.",
    )(func)


@click.command("run")
@click.argument("pipeline_spec", metavar="MODULE:ATTRIBUTE")
@click.option(
    "--master",
    default=None,
    help="Spark master when not started by spark-submit (default: spark.master, else local[2]).",
)
@_with_setting_options
def run_command(pipeline_spec: str, master: str | None, **options: Any) -> None:
    """Run the pipeline MODULE:ATTRIBUTE names (a Pipeline, or a function returning one)
    until its input ends, a stop-with-savepoint completes, or a newer run takes over.

    Each option is also the Spark setting spark.sparkpoint.<option> (e.g. --conf
    spark.sparkpoint.coordinator=…); an option given here wins over the setting.
    """
    from sparkpoint.examples.driver_process import progress_reporter
    from sparkpoint.pipeline.runtime.submit_settings import SettingsError, resolve
    from sparkpoint.pipeline.runtime.submitted import (
        load_pipeline,
        run_submitted,
        spark_conf,
        status_line,
        submitted_session,
    )

    conf = spark_conf()
    try:
        settings = resolve(options, conf)
        pipeline = load_pipeline(pipeline_spec)
    except (SettingsError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    spark = submitted_session(settings, conf, master, f"sparkpoint-{pipeline.job_id}")
    try:
        report = progress_reporter(settings.progress)
        outcome, status = run_submitted(pipeline, spark, settings, report)
    finally:
        spark.stop()
    click.echo(f"job {pipeline.job_id}: {status_line(status, outcome)}")
    if outcome == "interrupted":
        sys.exit(130)
