"""`sparkpoint coordinator run`: one coordinator replica in this process."""

from __future__ import annotations

import logging
import sys

import click

from sparkpoint.config import ConfigError
from sparkpoint.ha import HAError
from sparkpoint.ops.cli_common import (
    load,
    parse_sets,
    zookeeper_options,
    zookeeper_overrides,
)


@click.group("coordinator")
def coordinator_group() -> None:
    """Run coordinator replicas."""


@coordinator_group.command("run")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML file.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Any key (repeatable).")
@zookeeper_options
@click.option("--port", type=int, default=None, help="REST port (rest.port).")
@click.option(
    "--embedded",
    is_flag=True,
    help="No ZooKeeper (high-availability.type none); REST auth off unless set on.",
)
def run_command(
    *,
    config_file: str | None,
    settings: tuple[str, ...],
    quorum: str | None,
    cluster_id: str | None,
    root: str | None,
    port: int | None,
    embedded: bool,
) -> None:
    """Contend for leadership and, as leader, checkpoint every registered job.

    Configuration: FILE < SPARKPOINT_… environment < --set and flags. Every key is listed
    in docs/service.md. SIGTERM releases leadership at once and exits 0.

    \b
    sparkpoint coordinator run --zookeeper zk:2181 --cluster-id prod \\
        --set state.checkpoints.dir=hdfs://nn:8020/checkpoints --set rest.port=8081
    """
    overrides = {
        **parse_sets(settings),
        **{k: v for k, v in zookeeper_overrides(quorum, cluster_id, root).items() if v},
    }
    if port is not None:
        overrides["rest.port"] = str(port)
    if embedded:
        overrides["high-availability.type"] = "none"
        # One local process: authentication stays off unless asked for (said at start).
        overrides.setdefault("rest.auth.enabled", "false")
    config = load(config_file, overrides)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("kazoo.client").setLevel(logging.WARNING)
    from sparkpoint.service import run  # the server stack only when a replica runs

    try:
        status = run(config)
    except (OSError, HAError, ConfigError) as exc:  # port in use, no ZooKeeper, no tokens
        raise click.ClickException(str(exc)) from exc
    sys.exit(status)
