"""`sparkpoint coordinator run`: one coordinator replica in this process."""

from __future__ import annotations

import sys

import click

from sparkpoint.config import ConfigError
from sparkpoint.ha import HAError
from sparkpoint.ops.cli import logs
from sparkpoint.ops.cli.common import (
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
@click.option(
    "--log-level", type=click.Choice(logs.LEVELS), default="info", show_default=True,
    envvar="SPARKPOINT_LOG_LEVEL", help="Least severe level logged.",
)  # fmt: skip
@click.option(
    "--log-format", type=click.Choice(logs.FORMATS), default="text", show_default=True,
    envvar="SPARKPOINT_LOG_FORMAT", help="json: one JSON object per line.",
)  # fmt: skip
def run_command(
    *,
    config_file: str | None,
    settings: tuple[str, ...],
    quorum: str | None,
    cluster_id: str | None,
    root: str | None,
    port: int | None,
    embedded: bool,
    log_level: str,
    log_format: str,
) -> None:
    """Contend for leadership and, as leader, checkpoint every registered job.

    Configuration: FILE < SPARKPOINT_… environment < --set and flags. Every key is listed
    in docs/service.md. Without --config: the file SPARKPOINT_CONFIG names, else
    ~/.config/sparkpoint/sparkpoint.yaml, else /etc/sparkpoint/sparkpoint.yaml. SIGTERM
    releases leadership at once and exits 0.

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
    logs.configure(log_level, log_format)
    from sparkpoint.service import run  # the server stack only when a replica runs

    try:
        status = run(config)
    except (OSError, HAError, ConfigError) as exc:  # port in use, no ZooKeeper, no tokens
        raise click.ClickException(str(exc)) from exc
    sys.exit(status)


@coordinator_group.command("check")
@click.option(
    "--coordinator",
    "address",
    required=True,
    envvar="SPARKPOINT_COORDINATOR",
    metavar="HOST:PORT",
    help="Any replica's REST address, e.g. the Service's.",
)
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per call.")
def check_command(address: str, timeout: float) -> None:
    """Exit 0 when the published leader answers its /readyz with 200, else 1.

    For `helm test` and scripts: asks ADDRESS who leads, then asks the leader itself. Only
    the open probe endpoints are used, so no token is needed when authentication is on.
    """
    import httpx

    from sparkpoint.client.transport import normalise

    base = normalise(address)
    try:
        with httpx.Client(timeout=timeout) as http:
            leader = http.get(f"{base}/readyz").json().get("leader") or {}
            if not leader.get("address"):
                raise click.ClickException(f"{base}: no coordinator is leader")
            ready = http.get(f"{normalise(leader['address'])}/readyz")
    except httpx.HTTPError as exc:
        raise click.ClickException(f"{exc}") from exc
    except ValueError as exc:  # not a sparkpoint replica's JSON
        raise click.ClickException(f"{base}/readyz: not a coordinator's reply ({exc})") from exc
    if ready.status_code != 200:
        raise click.ClickException(
            f"leader {leader['address']} is not ready: {ready.status_code} {ready.text[:200]}"
        )
    click.echo(f"leader {leader.get('instance_id')} at {leader['address']} is ready")
