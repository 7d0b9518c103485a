"""`sparkpoint jvm list|fetch`: the pinned JVM software (Hadoop, Kafka, …) and its cache."""

from __future__ import annotations

import json

import click

from sparkpoint.ops.devcluster.jvm import (
    ARTIFACT_SETS,
    JvmArtifactsError,
    fetch,
    is_fetched,
    set_directory,
)


@click.group("jvm")
def jvm_group() -> None:
    """The JVM software sparkpoint runs beside Python, pinned and fetched once.

    Each set is fetched with Maven from Maven Central (checksums enforced) into
    $SPARKPOINT_JVM_CACHE (default ~/.cache/sparkpoint/jvm) the first time a command or
    test needs it. A set's environment variable (e.g. SPARKPOINT_HADOOP_HOME) points at an
    existing installation instead.
    """


@jvm_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def list_command(as_json: bool) -> None:
    """List the artifact sets, their pinned versions and whether they are cached."""
    rows = [
        {
            "name": spec.name,
            "purpose": spec.purpose,
            "artifacts": list(spec.artifacts),
            "fetched": is_fetched(spec.name),
            "directory": str(set_directory(spec.name)),
            "home_env": spec.home_env,
        }
        for spec in ARTIFACT_SETS.values()
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "fetched" if row["fetched"] else "not fetched"
        click.echo(f"{row['name']}: {row['purpose']} [{state}]")
        for artifact in row["artifacts"]:
            click.echo(f"  {artifact}")
        click.echo(f"  cache: {row['directory']}  (or ${row['home_env']})")


@jvm_group.command("fetch")
@click.argument("names", nargs=-1)
def fetch_command(names: tuple[str, ...]) -> None:
    """Fetch the named sets (all when none is named) unless they are cached."""
    for name in names or tuple(ARTIFACT_SETS):
        try:
            fetch(name)
        except JvmArtifactsError as exc:
            raise click.ClickException(str(exc)) from exc
