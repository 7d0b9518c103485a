"""``sparkpoint metadata``: read any checkpoint or savepoint `_metadata`, local or on HDFS,
with no coordinator running."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import click
from rich.table import Table

from sparkpoint.checkpoint import CompletedCheckpoint, FileStateHandle, OperatorState
from sparkpoint.metadata import MetadataError, describe_checkpoint
from sparkpoint.ops.cli.common import output_console
from sparkpoint.ops.cli.status import cluster_options, pointer_or_job
from sparkpoint.storage import (
    FileCheck,
    LoadedMetadata,
    StorageError,
    check_state_files,
    load_metadata,
)

#: Exit status when --verify finds missing or resized files (1 is an unreadable file).
EXIT_VERIFY_FAILED = 3


@click.group(name="metadata")
def metadata_group() -> None:
    """Read the _metadata of checkpoints and savepoints."""


@metadata_group.command(name="inspect")
@click.argument("pointer", required=False)
@click.option("--job", metavar="NAME", help="The job's latest retained checkpoint (asks the "
              "cluster: --coordinator or --zookeeper/--cluster-id).")  # fmt: skip
@cluster_options
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@click.option(
    "--verify", is_flag=True, help="Check that every state file exists with its recorded size."
)
@click.option("--subtasks", is_flag=True, help="Also list every subtask (table output).")
@click.option("--hdfs-user", envvar="SPARKPOINT_HDFS_USER", help="HDFS user (simple auth).")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="HDFS timeout (s).")
def inspect_command(
    pointer: str | None,
    *,
    job: str | None,
    as_json: bool,
    verify: bool,
    subtasks: bool,
    hdfs_user: str | None,
    timeout: float,
    **cluster: Any,
) -> None:
    """Show the checkpoint at POINTER: a chk-<id> or savepoint directory, or a _metadata
    file; a plain path, file://, hdfs:// or webhdfs:// URI.

    \b
    sparkpoint metadata inspect /data/checkpoints/clicks/chk-42
    sparkpoint metadata inspect hdfs://nn:8020/savepoints/savepoint-clicks-5f3a9c01be72 --verify
    sparkpoint metadata inspect --job clicks
    """
    pointer = pointer_or_job(pointer, job, cluster)
    options: dict[str, Any] = {"timeout": timeout}
    if hdfs_user:
        options["user"] = hdfs_user
    try:
        loaded = load_metadata(pointer, **options)
        checks = check_state_files(loaded.checkpoint, **options) if verify else None
    except (MetadataError, StorageError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(_as_json(loaded, checks), indent=2))
    else:
        _print_tables(loaded, checks, subtasks)
    if checks is not None and not all(c.ok for c in checks):
        sys.exit(EXIT_VERIFY_FAILED)


def _as_json(loaded: LoadedMetadata, checks: list[FileCheck] | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "metadata": {"uri": loaded.uri, "size": loaded.size, "checksum": loaded.checksum},
        **describe_checkpoint(loaded.checkpoint),
    }
    if checks is not None:
        result["verify"] = {
            "files": len(checks),
            "problems": [c.to_dict() for c in checks if not c.ok],
        }
    return result


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _handle_counts(state: OperatorState) -> tuple[int, int, int, int]:
    keyed = operator = files = inline = 0
    for subtask in state.subtask_states.values():
        keyed += len(subtask.keyed)
        operator += len(subtask.operator)
        streams = [s for h in subtask.keyed for s in h.streams]
        for stream in (*streams, *(h.stream for h in subtask.operator)):
            if isinstance(stream, FileStateHandle):
                files += 1
            else:
                inline += 1
    return keyed, operator, files, inline


def _print_tables(loaded: LoadedMetadata, checks: list[FileCheck] | None, subtasks: bool) -> None:
    console = output_console(highlight=False)
    console.print(_summary(loaded))
    console.print(_operators(loaded.checkpoint))
    if subtasks:
        console.print(_subtasks(loaded.checkpoint))
    if checks is not None:
        problems = [c for c in checks if not c.ok]
        console.print(f"verify: {len(checks)} state files checked, {len(problems)} problems")
        if problems:
            console.print(_problems(problems))


def _table(title: str, *columns: str, right_from: int = 99) -> Table:
    table = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        table.add_column(column, overflow="fold", justify="right" if i >= right_from else "left")
    return table


def _summary(loaded: LoadedMetadata) -> Table:
    cp = loaded.checkpoint
    grid = Table.grid(padding=(0, 2))
    duration = cp.completion_timestamp_ms - cp.trigger_timestamp_ms
    for name, value in (
        ("metadata", loaded.uri),
        ("size", f"{loaded.size} bytes"),
        ("checksum", loaded.checksum),
        ("job", cp.job_id),
        ("checkpoint", f"{cp.checkpoint_id} ({cp.kind.value})"),
        ("triggered", _time(cp.trigger_timestamp_ms)),
        ("completed", f"{_time(cp.completion_timestamp_ms)} (+{duration} ms)"),
        ("checkpointed size", f"{cp.checkpointed_size} bytes (written by this checkpoint)"),
        ("full size", f"{cp.state_size} bytes (all the state it references)"),
    ):
        grid.add_row(name, value)
    return grid


def _operators(cp: CompletedCheckpoint) -> Table:
    table = _table(
        "operators",
        "operator",
        "parallelism",
        "max par.",
        "subtasks with state",
        "keyed handles",
        "operator handles",
        "files",
        "inline",
        "checkpointed bytes",
        "full bytes",
        right_from=1,
    )
    for uid, state in cp.operator_states.items():
        with_state = sum(1 for s in state.subtask_states.values() if s.has_state)
        counts = _handle_counts(state)
        table.add_row(
            uid,
            str(state.parallelism),
            str(state.max_parallelism),
            f"{with_state}/{state.parallelism}",
            *(str(n) for n in counts),
            str(state.checkpointed_size),
            str(state.state_size),
        )
    return table


def _subtasks(cp: CompletedCheckpoint) -> Table:
    table = _table(
        "subtasks",
        "operator",
        "subtask",
        "key groups",
        "operator states",
        "streams",
        "checkpointed bytes",
        "full bytes",
    )
    for uid, state in cp.operator_states.items():
        for index, sub in sorted(state.subtask_states.items()):
            groups = [str(h.key_group_range) for h in sub.keyed]
            names = [f"{n} ({i.mode.value})" for h in sub.operator for n, i in h.states.items()]
            streams = [
                f"file {s.path}" if isinstance(s, FileStateHandle) else f"inline {s.name}"
                for s in (
                    *(s for h in sub.keyed for s in h.streams),
                    *(h.stream for h in sub.operator),
                )
            ]
            table.add_row(
                uid,
                str(index),
                *(", ".join(items) or "-" for items in (groups, names, streams)),
                str(sub.checkpointed_size),
                str(sub.state_size),
            )
    return table


def _problems(problems: list[FileCheck]) -> Table:
    table = _table("problems", "operator", "subtask", "path", "problem")
    for c in problems:
        table.add_row(c.operator_uid, str(c.subtask), c.path, c.problem or "")
    return table
