"""`sparkpoint state …`: read an operator's keyed state out of a checkpoint or savepoint,
offline (no coordinator; read access to the checkpoint's filesystem)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from sparkpoint.checkpoint import InvalidCheckpointValue
from sparkpoint.cli.status import cluster_options, pointer_or_job
from sparkpoint.recovery import RestoreError
from sparkpoint.storage import StorageError

_ERRORS = (RestoreError, StorageError, InvalidCheckpointValue)


@click.group("state")
def state_group() -> None:
    """Read pipelines' keyed state out of checkpoints and savepoints."""


@state_group.command("read")
@click.argument("pointer", required=False)
@click.option("--job", metavar="NAME", help="The job's latest retained checkpoint (asks the "
              "cluster: --coordinator or --zookeeper/--cluster-id).")  # fmt: skip
@cluster_options
@click.option(
    "--uid",
    metavar="UID",
    help="The operator whose keyed state to read (default: the one operator with keyed "
    "state; a pipeline's keyed function is 'process' unless the pipeline names it).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one JSON object per state; parquet: Parquet files written by a local "
    "Spark session (needs sparkpoint[pipeline] and --output).",
)
@click.option(
    "--output",
    "-o",
    metavar="PATH",
    help="Where to write (default for jsonl: stdout). parquet: a new directory.",
)
@click.option("--hdfs-user", envvar="SPARKPOINT_HDFS_USER", help="HDFS user (simple auth).")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="HDFS timeout (s).")
def read_command(
    pointer: str | None,
    *,
    job: str | None,
    uid: str | None,
    fmt: str,
    output: str | None,
    hdfs_user: str | None,
    timeout: float,
    **cluster: Any,
) -> None:
    """Print one operator's keyed state in POINTER: one line per key and state.

    POINTER is a chk-<id> directory, a savepoint directory, a _metadata file, or a job's
    checkpoint directory (its newest readable checkpoint); local paths, file://, hdfs://
    and webhdfs:// URIs. Any state backend: key-group streams and the rocksdb backend's
    incremental store files alike.

    Each jsonl line is {"key": …, "state": NAME, "value": …}: keys and values as JSON
    (tuples as arrays; what JSON cannot hold as the string of its repr). Values are
    unpickled: read only checkpoints you trust, with the pipeline's own modules on
    PYTHONPATH when its state holds objects of its own classes.

    \b
    Example:
      sparkpoint state read /ckpt/clicks/chk-42 --uid process
      sparkpoint state read --job clicks | jq 'select(.state == "totals")'
      sparkpoint state read /savepoints/savepoint-clicks-5f3a9c01be72 \\
          --format parquet -o /tmp/clicks-state
    """
    pointer = pointer_or_job(pointer, job, cluster)
    options: dict[str, Any] = {"timeout": timeout}
    if hdfs_user:
        options["user"] = hdfs_user
    if fmt == "parquet":
        _parquet(pointer, uid, output, options)
        return
    from sparkpoint.pipeline.state_entries import read_state_entries, to_json

    try:
        entries = read_state_entries(pointer, uid, **options)
        out = open(output, "w", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
        try:
            for e in entries:
                out.write(
                    f'{{"key": {to_json(e.key)}, "state": {json.dumps(e.state)}, '
                    f'"value": {to_json(e.value)}}}\n'
                )
        finally:
            if output:
                out.close()
    except _ERRORS as exc:
        raise click.ClickException(str(exc)) from exc
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"reading this state needs the pipeline runtime ({exc}): install sparkpoint[pipeline]"
        ) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot write {output or 'stdout'}: {exc}") from exc


def _parquet(pointer: str, uid: str | None, output: str | None, options: dict[str, Any]) -> None:
    if not output:
        raise click.UsageError("--format parquet writes a directory: give it with --output")
    try:
        from sparkpoint.pipeline.state_processor import write_parquet

        rows = write_parquet(pointer, uid, output, **options)
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"--format parquet needs Spark ({exc}): install sparkpoint[pipeline]"
        ) from exc
    except _ERRORS as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{rows} rows (key, state, value) written to {output}", err=True)
