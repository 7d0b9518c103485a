"""`sparkpoint kafka start|stop|status`: a real local Kafka (KRaft) for tests and trying out."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sparkpoint.ops.cli.common import json_option, server_dir_option
from sparkpoint.ops.devcluster.jvm import JvmArtifactsError
from sparkpoint.ops.devcluster.kafka import KafkaLaunchError, LocalKafka

DEFAULT_DIR = Path(".sparkpoint/kafka")


@click.group("kafka")
def kafka_group() -> None:
    """Run a local Kafka cluster (1 or 3 nodes, KRaft mode, no ZooKeeper) on loopback.

    Kafka's jars are the `kafka` set of `sparkpoint jvm` (fetched from Maven Central the
    first time; or $SPARKPOINT_KAFKA_HOME), so Java 17 and Maven are the prerequisites.
    The nodes keep running after this command returns; `stop` ends them.
    """


_dir_option = server_dir_option(
    DEFAULT_DIR, "Where the nodes keep their data, logs and the launcher's state."
)


@kafka_group.command("start")
@click.option("--nodes", type=click.Choice(["1", "3"]), default="1", show_default=True,
              help="One node, or three (internal topics replicated 3 times).")  # fmt: skip
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds to wait for the cluster to serve.")  # fmt: skip
@_dir_option
@json_option
def start(nodes: str, timeout: float, directory: Path, as_json: bool) -> None:
    """Start Kafka and print its bootstrap servers once it serves."""
    kafka = LocalKafka(directory, nodes=int(nodes))
    try:
        kafka.start(timeout=timeout)
    except (KafkaLaunchError, JvmArtifactsError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"bootstrap": kafka.bootstrap, "nodes": kafka.status()}))
    else:
        click.echo(f"Kafka serving at {kafka.bootstrap} (data in {kafka.directory})")
        click.echo(f"stop it with: sparkpoint kafka stop --dir {directory}")


@kafka_group.command("stop")
@_dir_option
def stop(directory: Path) -> None:
    """Stop the nodes started from --dir (their data stays)."""
    try:
        kafka = LocalKafka.attach(directory)
    except KafkaLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    kafka.stop()
    click.echo(f"Kafka at {kafka.bootstrap} stopped")


@kafka_group.command("status")
@_dir_option
@json_option
def status(directory: Path, as_json: bool) -> None:
    """Show each node's address, pid and whether it serves; exit 1 unless all do."""
    try:
        kafka = LocalKafka.attach(directory)
    except KafkaLaunchError as exc:
        raise click.ClickException(str(exc)) from exc
    rows = kafka.status()
    if as_json:
        click.echo(json.dumps({"bootstrap": kafka.bootstrap, "nodes": rows}))
    else:
        for row in rows:
            state = "serving" if row["serving"] else "down"
            click.echo(f"node {row['node']}  {row['address']}  pid {row['pid']}  {state}")
    if not all(row["serving"] for row in rows):
        raise SystemExit(1)
