"""`sparkpoint state …`: read an operator's keyed state out of a checkpoint or savepoint,
and write a savepoint from such state, offline (no coordinator; access to the
checkpoint's filesystem)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from sparkpoint.checkpoint import InvalidCheckpointValue
from sparkpoint.ops.cli.status import cluster_options, pointer_or_job
from sparkpoint.recovery import RestoreError
from sparkpoint.storage import StorageError

_ERRORS = (RestoreError, StorageError, InvalidCheckpointValue)


@click.group("state")
def state_group() -> None:
    """Read pipelines' keyed state out of checkpoints and savepoints; write savepoints
    from such state."""


def _hdfs_options(func: Any) -> Any:
    func = click.option("--timeout", type=float, default=30.0, show_default=True,
                        help="HDFS timeout (s).")(func)  # fmt: skip
    return click.option("--hdfs-user", envvar="SPARKPOINT_HDFS_USER",
                        help="HDFS user (simple auth).")(func)  # fmt: skip


def _fs_options(hdfs_user: str | None, timeout: float) -> dict[str, Any]:
    options: dict[str, Any] = {"timeout": timeout}
    if hdfs_user:
        options["user"] = hdfs_user
    return options


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
@click.option(
    "--operator-state",
    is_flag=True,
    help="Print operator (non-keyed) state instead: sources' offsets, sinks' transactions, "
    "broadcast maps; of --uid, or of every operator that has some (jsonl only).",
)
@_hdfs_options
def read_command(
    pointer: str | None,
    *,
    job: str | None,
    uid: str | None,
    fmt: str,
    output: str | None,
    operator_state: bool,
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

    With --operator-state each line is {"operator": …, "subtask": …, "state": NAME,
    "mode": SPLIT_DISTRIBUTE|UNION|BROADCAST, "value": …}, one per element; a broadcast
    function's map NAME is the state "broadcast/NAME", one copy per subtask.

    `sparkpoint state write` writes keyed lines back as a savepoint.
    """
    pointer = pointer_or_job(pointer, job, cluster)
    options = _fs_options(hdfs_user, timeout)
    if fmt == "parquet":
        if operator_state:
            raise click.UsageError("--operator-state prints jsonl only")
        _parquet(pointer, uid, output, options)
        return
    from sparkpoint.pipeline.state_processor.entries import read_state_entries, to_json
    from sparkpoint.pipeline.state_processor.operator_entries import (
        read_operator_state_entries,
    )

    try:
        if operator_state:
            lines = (
                f'{{"operator": {json.dumps(e.operator)}, "subtask": {e.subtask}, '
                f'"state": {json.dumps(e.state)}, "mode": "{e.mode}", '
                f'"value": {to_json(e.value)}}}\n'
                for e in read_operator_state_entries(pointer, uid, **options)
            )
        else:
            lines = (
                f'{{"key": {to_json(e.key)}, "state": {json.dumps(e.state)}, '
                f'"value": {to_json(e.value)}}}\n'
                for e in read_state_entries(pointer, uid, **options)
            )
        out = open(output, "w", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
        try:
            for line in lines:
                out.write(line)
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
        from sparkpoint.pipeline.state_processor.savepoints import write_parquet

        rows = write_parquet(pointer, uid, output, **options)
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"--format parquet needs Spark ({exc}): install sparkpoint[pipeline]"
        ) from exc
    except _ERRORS as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{rows} rows (key, state, value) written to {output}", err=True)


@state_group.command("write")
@click.argument("input_path", metavar="INPUT")
@click.option("--uid", required=True, metavar="UID",
              help="The operator the state is for (a pipeline's keyed function is "
                   "'process' unless the pipeline names it).")  # fmt: skip
@click.option("--parallelism", "-p", type=click.IntRange(min=1), required=True,
              help="Subtasks to write the state for; the job may start at another "
                   "parallelism (the restore rescales).")  # fmt: skip
@click.option("--max-parallelism", type=click.IntRange(min=1), metavar="M",
              help="The job's max parallelism, which the savepoint must have (default: "
                   "the default for --parallelism, 128 up to parallelism 85).")  # fmt: skip
@click.option("--job", "job_id", default="bootstrap", show_default=True, metavar="NAME",
              help="The job the savepoint is for: its directory is savepoint-NAME-<random> "
                   "(first 6 characters of NAME).")  # fmt: skip
@click.option("--output", "-o", required=True, metavar="DIR",
              help="Where the new savepoint directory goes (local path, file://, hdfs:// "
                   "or webhdfs://).")  # fmt: skip
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    default="jsonl",
    show_default=True,
    help="jsonl: the lines of `state read` (INPUT '-': stdin); parquet: the directory "
    "`state read --format parquet` writes, read by a local Spark session (needs "
    "sparkpoint[pipeline]).",
)
@_hdfs_options
def write_command(
    input_path: str,
    *,
    uid: str,
    parallelism: int,
    max_parallelism: int | None,
    job_id: str,
    output: str,
    fmt: str,
    hdfs_user: str | None,
    timeout: float,
) -> None:
    """Write INPUT's keyed state as a new savepoint-<job>-<random> directory under DIR
    and print that directory: a pipeline starts from it (restore_from=… of
    PipelineDriver, --restore-from of the example drivers).

    INPUT holds what `sparkpoint state read` prints: one {"key": …, "state": …,
    "value": …} per line (arrays become tuples in keys and stay lists in values). A line
    that is not such an object, or a state given twice for one key, is refused before
    anything is written. The savepoint holds only the operator UID: the job's sources
    start from their beginning and its sinks with no transactions, as on a first start.

    \b
    Example (edit a job's state, start it again from the edit):
      sparkpoint state read /ckpt/clicks/chk-42 > clicks.jsonl
      sparkpoint state write clicks.jsonl --uid process -p 4 --job clicks -o /savepoints
    """
    options = _fs_options(hdfs_user, timeout)
    target = {"uid": uid, "parallelism": parallelism, "max_parallelism": max_parallelism,
              "job_id": job_id, **options}  # fmt: skip
    if fmt == "parquet":
        if input_path == "-":
            raise click.UsageError("--format parquet reads a directory: INPUT cannot be '-'")
        savepoint, rows = _write_parquet(input_path, output, target)
    else:
        savepoint, rows = _write_jsonl(input_path, output, target)
    click.echo(savepoint)
    click.echo(f"{rows} entries of operator {uid!r} written, at parallelism {parallelism}",
               err=True)  # fmt: skip


def _write_jsonl(input_path: str, output: str, target: dict[str, Any]) -> tuple[str, int]:
    from sparkpoint.pipeline.state_processor.entries import (
        entries_from_json_lines,
        write_savepoint_entries,
    )

    where = "stdin" if input_path == "-" else input_path
    try:
        source = sys.stdin if input_path == "-" else open(input_path, encoding="utf-8")  # noqa: SIM115
        with source:
            entries = list(entries_from_json_lines(source, where))
    except OSError as exc:
        raise click.ClickException(f"cannot read {where}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{where} is not UTF-8 text ({exc})") from exc
    except ValueError as exc:  # a line that is not an entry
        raise click.ClickException(str(exc)) from exc
    try:
        return write_savepoint_entries(entries, output, **target), len(entries)
    except (*_ERRORS, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _write_parquet(input_path: str, output: str, target: dict[str, Any]) -> tuple[str, int]:
    try:
        from sparkpoint.pipeline.state_processor.savepoints import savepoint_from_parquet

        return savepoint_from_parquet(input_path, output, **target)
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"--format parquet needs Spark ({exc}): install sparkpoint[pipeline]"
        ) from exc
    except (*_ERRORS, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
