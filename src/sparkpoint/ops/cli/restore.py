"""`sparkpoint restore …`: plan a restore from a checkpoint or savepoint, offline.

A thin layer over :mod:`sparkpoint.recovery`: it needs no coordinator and no ZooKeeper,
only read access to the checkpoint's filesystem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from sparkpoint.checkpoint import (
    CompletedCheckpoint,
    FileStateHandle,
    InvalidCheckpointValue,
    JobGraph,
    OperatorSpec,
    StreamStateHandle,
)
from sparkpoint.ops.cli.common import output_console
from sparkpoint.ops.cli.status import cluster_options, pointer_or_job
from sparkpoint.recovery import RestoreError, RestorePlan, plan_restore
from sparkpoint.recovery.loading import LoadedCheckpoint, load_checkpoint
from sparkpoint.recovery.validation import has_keyed_state
from sparkpoint.storage import CheckpointStorage, StorageError


@click.group("restore")
def restore() -> None:
    """Plan restores from checkpoints and savepoints, at any parallelism."""


def _parse_assignments(values: tuple[str, ...], option: str) -> tuple[int | None, dict[str, int]]:
    """``UID=N`` pairs, and one bare ``N`` meaning every operator."""
    every: int | None = None
    per_uid: dict[str, int] = {}
    for value in values:
        uid, sep, number = value.rpartition("=")
        if not number.isdigit() or int(number) < 1 or (sep and not uid):
            raise click.BadParameter(f"{value!r} is not UID=N or N (N ≥ 1)", param_hint=option)
        if sep:
            per_uid[uid] = int(number)
        else:
            every = int(number)
    return every, per_uid


def _new_graph(
    checkpoint: CompletedCheckpoint,
    graph_file: str | None,
    parallelism: tuple[str, ...],
    max_parallelism: tuple[str, ...],
) -> JobGraph:
    """The graph to restore into: ``--graph`` or the checkpoint's own operators, with the
    overrides applied."""
    if graph_file:
        try:
            base = JobGraph.from_dict(json.loads(Path(graph_file).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise click.BadParameter(str(exc), param_hint="--graph") from exc
    else:
        base = JobGraph(
            checkpoint.job_id,
            tuple(
                OperatorSpec(uid, s.parallelism, s.max_parallelism, keyed=has_keyed_state(s))
                for uid, s in checkpoint.operator_states.items()
            ),
        )
    every_p, per_p = _parse_assignments(parallelism, "--parallelism")
    every_m, per_m = _parse_assignments(max_parallelism, "--max-parallelism")
    known = {op.uid for op in base.operators}
    for uid in sorted((per_p.keys() | per_m.keys()) - known):
        raise click.BadParameter(
            f"operator {uid!r} is not in the job graph (operators: {', '.join(sorted(known))})"
        )
    specs = []
    for op in base.operators:
        new_m = per_m.get(op.uid, every_m or op.max_parallelism)
        new_p = per_p.get(op.uid, every_p or op.parallelism)
        specs.append(OperatorSpec(op.uid, new_p, new_m, op.name, op.keyed, op.acknowledges))
    return JobGraph(base.job_id, tuple(specs))


def _stream_name(stream: StreamStateHandle) -> str:
    if isinstance(stream, FileStateHandle):
        return stream.path.rsplit("/", 1)[-1]
    return f"inline {stream.name}"


def _print_plan(
    console: Console, loaded: LoadedCheckpoint, plan: RestorePlan, subtasks: bool
) -> None:
    console.print(f"Restore plan for job [bold]{plan.job_id}[/bold] from {loaded.describe()}")
    for skipped in loaded.skipped:
        console.print(
            f"  [yellow]skipped checkpoint {skipped.checkpoint_id}:[/yellow] {skipped.reason}"
        )
    for uid in plan.non_restored:
        console.print(f"  [yellow]not restored:[/yellow] operator {uid!r} (not in the new graph)")
    table = Table(
        "operator",
        "P old → new",
        "max P",
        "key groups each",
        "keyed handles",
        "operator handles",
        "with state",
    )
    for op in plan:
        sizes = [s.key_group_range.num_key_groups for s in op.subtasks]
        old = "new" if op.old_parallelism is None else str(op.old_parallelism)
        table.add_row(
            op.operator_uid,
            f"{old} → {op.parallelism}",
            str(op.max_parallelism),
            f"{min(sizes)}-{max(sizes)}" if min(sizes) != max(sizes) else str(sizes[0]),
            str(sum(len(s.keyed) for s in op.subtasks)),
            str(sum(len(s.operator) for s in op.subtasks)),
            f"{sum(s.has_state for s in op.subtasks)} of {op.parallelism}",
        )
    console.print(table)
    if not subtasks:
        return
    for op in plan:
        detail = Table(
            "subtask",
            "key groups",
            "keyed handles (key groups ← file)",
            "operator state",
            title=op.operator_uid,
        )
        for s in op.subtasks:
            keyed = "\n".join(
                f"{h.key_group_range} ← {', '.join(_stream_name(x) for x in h.streams)}"
                for h in s.keyed
            )
            names = sorted({n for h in s.operator for n in h.states})
            elements = sum(len(i.offsets) for h in s.operator for i in h.states.values())
            detail.add_row(
                str(s.index),
                str(s.key_group_range),
                keyed or "-",
                f"{elements} elements of {', '.join(names)}" if names else "-",
            )
        console.print(detail)


@restore.command("plan")
@click.argument("pointer", required=False)
@click.option("--job", metavar="NAME", help="The job's latest retained checkpoint (asks the "
              "cluster: --coordinator or --zookeeper/--cluster-id).")  # fmt: skip
@cluster_options
@click.option(
    "--parallelism",
    "-p",
    multiple=True,
    metavar="UID=P",
    help="New parallelism of an operator (repeatable); a bare P sets every operator.",
)
@click.option(
    "--max-parallelism",
    multiple=True,
    metavar="UID=M",
    help="New max parallelism of an operator (refused for keyed state).",
)
@click.option(
    "--graph",
    "graph_file",
    type=click.Path(dir_okay=False),
    help="The new job graph as JSON (default: the checkpoint's own operators).",
)
@click.option(
    "--allow-non-restored-state",
    is_flag=True,
    help="Drop the state of operators that are not in the new graph.",
)
@click.option("--subtasks", is_flag=True, help="Also list every subtask's handles.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--hdfs-user", envvar="SPARKPOINT_HDFS_USER", help="HDFS user (simple auth).")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="HDFS timeout (s).")
def plan_command(
    pointer: str | None,
    *,
    job: str | None,
    parallelism: tuple[str, ...],
    max_parallelism: tuple[str, ...],
    graph_file: str | None,
    allow_non_restored_state: bool,
    subtasks: bool,
    as_json: bool,
    hdfs_user: str | None,
    timeout: float,
    **cluster: Any,
) -> None:
    """Show which state every new subtask would read when restoring POINTER.

    POINTER is a chk-<id> directory, a savepoint directory, a _metadata file, or a job's
    checkpoint directory (its newest readable checkpoint). Local paths, file://, hdfs://
    and webhdfs:// URIs.

    \b
    Example:
      sparkpoint restore plan /ckpt/clicks -p count=8 -p source=2
      sparkpoint restore plan --job clicks -p 8
    """
    pointer = pointer_or_job(pointer, job, cluster)
    try:
        options: dict[str, Any] = {"timeout": timeout}
        if hdfs_user:
            options["user"] = hdfs_user
        loaded = load_checkpoint(CheckpointStorage(pointer, **options), pointer)
        graph = _new_graph(loaded.checkpoint, graph_file, parallelism, max_parallelism)
        plan = plan_restore(loaded.checkpoint, graph, allow_non_restored_state)
    except (RestoreError, StorageError, InvalidCheckpointValue) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=1))
    else:
        _print_plan(output_console(), loaded, plan, subtasks)
