"""`sparkpoint hdfs start|stop|status`: a real local HDFS (NameNode + DataNodes)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from sparkpoint.ops.cli.common import json_option, server_dir_option
from sparkpoint.ops.devcluster.hdfs import DEFAULT_BLOCK_SIZE, HdfsLaunchError, LocalHdfs
from sparkpoint.ops.devcluster.jvm import JvmArtifactsError

DEFAULT_DIR = Path(".sparkpoint/hdfs")
#: Names the HDFS of `hdfs start --dir` to the other commands (status, stop, the demo,
#: the drills) without repeating the directory.
DIR_ENVVAR = "SPARKPOINT_HDFS_DIR"


@click.group("hdfs")
def hdfs_group() -> None:
    """Run a real HDFS on loopback: one NameNode and N DataNodes, each its own JVM.

    The daemons are Apache Hadoop's own (the `hadoop` set of `sparkpoint jvm`, fetched
    from Maven Central on first use, or $SPARKPOINT_HADOOP_HOME). WebHDFS and permissions
    are on; /tmp is writable by every user. The daemons keep running after this command
    returns; `stop` ends them. Checkpoint directories go under the printed webhdfs:// URI.
    """


#: ``--hdfs-dir`` of the commands that use this HDFS (the demo, the drills).
hdfs_dir_option = click.option(
    "--hdfs-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DIR,
    show_default=True,
    envvar=DIR_ENVVAR,
    show_envvar=True,
    help="The --dir of `sparkpoint hdfs start` (with --storage hdfs).",
)

_dir_option = server_dir_option(
    DEFAULT_DIR,
    "Where the daemons keep their configuration, data, logs and the launcher's state.",
    envvar=DIR_ENVVAR,
)


@hdfs_group.command("start")
@click.option("--datanodes", type=click.IntRange(1, 16), default=3, show_default=True,
              help="How many DataNodes.")  # fmt: skip
@click.option("--replication", type=click.IntRange(1, 16),
              help="dfs.replication (default: min(3, DataNodes)).")  # fmt: skip
@click.option("--block-size", type=click.IntRange(512), default=DEFAULT_BLOCK_SIZE,
              show_default=True, help="dfs.blocksize in bytes (a multiple of 512).")  # fmt: skip
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds to wait for every DataNode live, safe mode off.")  # fmt: skip
@_dir_option
@json_option
def start(
    datanodes: int,
    replication: int | None,
    block_size: int,
    timeout: float,
    directory: Path,
    as_json: bool,
) -> None:
    """Format a new namespace, start the daemons and print the addresses once ready."""
    try:
        cluster = LocalHdfs(
            directory, datanodes=datanodes, replication=replication, block_size=block_size
        )
        cluster.start(timeout=timeout)
    except (HdfsLaunchError, JvmArtifactsError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(cluster.status()))
        return
    click.echo(
        f"HDFS serving: {len(cluster.running_datanodes())} DataNodes, replication "
        f"{cluster.replication} (data in {cluster.base_dir})"
    )
    click.echo(f"  checkpoints: --checkpoint-dir {cluster.webhdfs_uri}/tmp/checkpoints")
    click.echo(f"  Hadoop RPC:  {cluster.rpc_uri}")
    click.echo(f"stop it with: sparkpoint hdfs stop --dir {directory}")
    if directory.resolve() != DEFAULT_DIR.resolve():
        click.echo(
            f"for the demo and the drills (--storage hdfs) in other shells: "
            f"export {DIR_ENVVAR}={directory.resolve()}"
        )


@hdfs_group.command("stop")
@_dir_option
def stop(directory: Path) -> None:
    """Stop the daemons started from --dir (DataNodes first)."""
    try:
        cluster = LocalHdfs.attach(directory)
    except HdfsLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    cluster.stop()
    click.echo(f"HDFS at {cluster.rpc_uri} stopped")


@hdfs_group.command("status")
@_dir_option
@json_option
def status(directory: Path, as_json: bool) -> None:
    """Live DataNodes, safe mode, capacity and addresses (exit 1 if the NameNode is down)."""
    try:
        cluster = LocalHdfs.attach(directory)
    except HdfsLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    report = cluster.status()
    if as_json:
        click.echo(json.dumps(report))
    else:
        _print_status(report)
    if not report["serving"]:
        raise SystemExit(1)


def _print_status(report: dict[str, object]) -> None:
    console = Console()
    if report["serving"]:
        gib = 1024**3
        console.print(
            f"Hadoop {report['version']}: {report['live_datanodes']} live DataNodes, "
            f"{report['dead_datanodes']} dead; safe mode "
            f"{'ON' if report['safe_mode'] else 'off'}; capacity "
            f"{int(report['capacity_bytes']) / gib:.1f} GiB, "  # type: ignore[call-overload]
            f"{int(report['remaining_bytes']) / gib:.1f} GiB free"  # type: ignore[call-overload]
        )
    else:
        console.print("the NameNode is not serving")
    console.print(f"WebHDFS: {report['webhdfs_uri']}   Hadoop RPC: {report['rpc_uri']}")
    table = Table("daemon", "pid", "http", "rpc / data")
    for daemon in report["daemons"]:  # type: ignore[attr-defined]
        table.add_row(
            daemon["name"],
            str(daemon["pid"] or "-"),
            daemon["http"],
            daemon.get("rpc") or daemon.get("data"),
        )
    console.print(table)
