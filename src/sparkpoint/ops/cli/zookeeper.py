"""`sparkpoint zookeeper start|stop|status`: a real local ZooKeeper for trying things out."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from sparkpoint.ops.cli.common import json_option, output_console, server_dir_option
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, ZooKeeperLaunchError

DEFAULT_DIR = Path(".sparkpoint/zookeeper")


@click.group("zookeeper")
def zookeeper_group() -> None:
    """Run a local ZooKeeper server (or a 3-server ensemble) on loopback.

    The jars come from $SPARKPOINT_ZK_CLASSPATH, Debian's zookeeper package, or the
    ZooKeeper jars inside the installed pyspark, so Java is the only prerequisite.
    The servers keep running after this command returns; `stop` ends them.
    """


_dir_option = server_dir_option(
    DEFAULT_DIR, "Where the servers keep their data, logs and the launcher's state."
)


@zookeeper_group.command("start")
@click.option("--port", type=click.IntRange(1, 65535), help="Client port of the first server "
              "(an ensemble uses PORT, PORT+1, PORT+2). Default: free ports.")  # fmt: skip
@click.option("--servers", type=click.Choice(["1", "3"]), default="1", show_default=True,
              help="One standalone server or a 3-server ensemble.")  # fmt: skip
@click.option("--tick-ms", type=click.IntRange(50, 10_000), default=2000, show_default=True,
              help="ZooKeeper tickTime; sessions may time out from 2 ticks.")  # fmt: skip
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for the servers to serve.")  # fmt: skip
@_dir_option
@json_option
def start(
    port: int | None, servers: str, tick_ms: int, timeout: float, directory: Path, as_json: bool
) -> None:
    """Start ZooKeeper and print its connect string once it serves."""
    zk = LocalZooKeeper(directory, servers=int(servers), port=port, tick_time_ms=tick_ms)
    try:
        zk.start(timeout=timeout)
    except ZooKeeperLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"connect_string": zk.connect_string, "servers": zk.status()}))
    else:
        click.echo(f"ZooKeeper serving at {zk.connect_string} (data in {zk.base_dir})")
        click.echo(f"stop it with: sparkpoint zookeeper stop --dir {directory}")


@zookeeper_group.command("stop")
@_dir_option
def stop(directory: Path) -> None:
    """Stop the servers started from --dir."""
    try:
        zk = LocalZooKeeper.attach(directory)
    except ZooKeeperLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    zk.stop()
    click.echo(f"ZooKeeper at {zk.connect_string} stopped")


@zookeeper_group.command("status")
@_dir_option
@json_option
def status(directory: Path, as_json: bool) -> None:
    """Show each server: address, process and role (exit 1 if none serves)."""
    try:
        zk = LocalZooKeeper.attach(directory)
    except ZooKeeperLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    rows = zk.status()
    if as_json:
        click.echo(json.dumps({"connect_string": zk.connect_string, "servers": rows}))
    else:
        table = Table("server", "address", "pid", "mode")
        for row in rows:
            table.add_row(*(str(row[k] if row[k] is not None else "-") for k in
                            ("server", "address", "pid", "mode")))  # fmt: skip
        output_console().print(table)
    if not any(row["mode"] for row in rows):
        raise SystemExit(1)
