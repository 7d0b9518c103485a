"""Options several command groups share: configuration sources and where to reach things."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from sparkpoint.config import Config, ConfigError, load_config

F = Callable[..., Any]


def parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` pairs of ``--set``."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint="--set")
        out[key.strip()] = val
    return out


def zookeeper_options(func: F) -> F:
    """``--zookeeper``, ``--cluster-id``, ``--root`` (flags win over file and environment)."""
    func = click.option(
        "--root", default=None, help="Root znode (high-availability.zookeeper.path.root)."
    )(func)
    func = click.option(
        "--cluster-id", default=None, help="Cluster id (high-availability.cluster-id)."
    )(func)
    return click.option(
        "--zookeeper",
        "quorum",
        default=None,
        metavar="QUORUM",
        help="ZooKeeper connect string (high-availability.zookeeper.quorum).",
    )(func)


def zookeeper_overrides(quorum: str | None, cluster_id: str | None, root: str | None) -> dict:
    return {
        "high-availability.zookeeper.quorum": quorum,
        "high-availability.cluster-id": cluster_id,
        "high-availability.zookeeper.path.root": root,
    }


def load(config_file: str | None, overrides: dict[str, Any]) -> Config:
    try:
        return load_config(config_file, overrides=overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


#: Width when output goes to a file or a pipe: wide enough that no path or id is cut.
PIPE_WIDTH = 100_000


def output_console(**options: Any) -> Console:
    """A console on stdout: the terminal's width on a terminal, else wide enough that
    tables and paths are never cut or wrapped (for grep, files and scripts)."""
    console = Console(soft_wrap=True, **options)
    if console.is_terminal:
        return console
    return Console(soft_wrap=True, width=PIPE_WIDTH, **options)


#: ``--json`` of every command that prints: machine-readable output for scripts.
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def server_dir_option(default: Path, help_text: str, envvar: str | None = None) -> Callable[[F], F]:
    """``--dir`` of a local server's start/status/stop (ZooKeeper, HDFS, Kafka)."""
    return click.option(
        "--dir",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=default,
        show_default=True,
        envvar=envvar,
        show_envvar=envvar is not None,
        help=help_text,
    )
