"""`sparkpoint leader | jobs | checkpoints | savepoints`: thin commands over the client.

Read-only commands ask a coordinator (``--coordinator``, or the leader found in
ZooKeeper); while none answers they read ZooKeeper and storage directly (``--zookeeper``,
``--cluster-id``), which needs no coordinator at all. Triggers need a leader.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any

import click

from sparkpoint.client import ClientError, CoordinatorClient, Credentials, Unavailable
from sparkpoint.config import env_name
from sparkpoint.ha import HAError, UnknownClusterError, require_cluster
from sparkpoint.ops.cli import tables
from sparkpoint.ops.cli.common import load, zookeeper_options, zookeeper_overrides
from sparkpoint.ops.cli.status_sources import (
    ClientSource,
    StatusSource,
    ZooKeeperSource,
    client_answers,
    leader_address,
    zookeeper,
)
from sparkpoint.runs.errors import ServiceError
from sparkpoint.storage import CheckpointStorage

F = Callable[..., Any]
QUORUM_KEY = "high-availability.zookeeper.quorum"
CLUSTER_KEY = "high-availability.cluster-id"


def connection_options(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)
    return cluster_options(func)


def cluster_options(func: F) -> F:
    """Where the cluster is: coordinators, or ZooKeeper (and credentials for either)."""
    func = zookeeper_options(func)
    func = click.option("--config", "config_file", type=click.Path(dir_okay=False))(func)
    func = click.option(
        "--token-file",
        envvar="SPARKPOINT_TOKEN_FILE",
        type=click.Path(dir_okay=False),
        help="File holding the bearer token (docs/security.md).",
    )(func)
    func = click.option(
        "--ca-file",
        envvar="SPARKPOINT_CA_FILE",
        type=click.Path(dir_okay=False),
        help="CA that signed the coordinators' TLS certificates (addresses mean https).",
    )(func)
    return click.option(
        "--coordinator",
        "coordinators",
        multiple=True,
        envvar="SPARKPOINT_COORDINATOR",
        metavar="HOST:PORT",
        help="A coordinator replica's REST address (repeatable).",
    )(func)


def _credentials(opts: dict[str, Any]) -> Credentials:
    try:
        creds = Credentials.from_env().with_token_file(opts.get("token_file"))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if opts.get("ca_file"):
        creds = replace(creds, ca_file=opts["ca_file"])
    return creds


@contextmanager
def _source(opts: dict[str, Any], *, read_only: bool = True) -> Iterator[StatusSource]:
    """A coordinator if one answers; else (read-only) ZooKeeper and storage.

    Addresses: ``--coordinator``, else the leader published in ZooKeeper (when ZooKeeper
    is given by flag, file or environment), else 127.0.0.1 at ``rest.port``.
    """
    overrides = zookeeper_overrides(opts["quorum"], opts["cluster_id"], opts["root"])
    config = load(opts["config_file"], overrides)
    zookeeper_given = bool(
        opts["quorum"] or opts["config_file"] or os.environ.get(env_name(QUORUM_KEY))
    )
    with ExitStack() as stack:
        addresses = list(opts["coordinators"])
        conn = None
        retry_for_s: float | None = None
        if zookeeper_given:
            try:
                conn = stack.enter_context(zookeeper(config))
                require_cluster(conn)
            except UnknownClusterError:
                raise
            except HAError as exc:
                if not addresses:
                    raise click.ClickException(f"{exc}\n{WHERE_HINT}") from exc
        if not addresses and conn is not None:
            found = leader_address(conn)
            addresses = [found] if found else []
        elif not addresses:  # nothing configured: a local coordinator answers at once or not
            addresses = [f"127.0.0.1:{config.rest.port}"]
            retry_for_s = 1.0
        if addresses:
            client = stack.enter_context(
                CoordinatorClient(
                    addresses,
                    timeout_s=5,
                    retry_for_s=retry_for_s or (2 if conn else 10),
                    credentials=_credentials(opts),
                )
            )
            if not read_only or conn is None or client_answers(client):
                yield ClientSource(client)
                return
        if conn is None:
            raise click.ClickException(
                f"no coordinator answers and no ZooKeeper was given\n{WHERE_HINT}"
            )
        yield ZooKeeperSource(conn, CheckpointStorage(config.storage.checkpoints_dir))


WHERE_HINT = (
    "Tell the CLI where the cluster is: --coordinator HOST:PORT (or SPARKPOINT_COORDINATOR="
    "'HOST:PORT ...'), or --zookeeper QUORUM --cluster-id ID (or "
    f"{env_name(QUORUM_KEY)} and {env_name(CLUSTER_KEY)}) to find the leader there and read "
    "ZooKeeper while no coordinator answers. `sparkpoint demo` prints these when it starts."
)


def _run(opts: dict[str, Any], action: Callable[[StatusSource], Any], *, read_only: bool) -> Any:
    try:
        with _source(opts, read_only=read_only) as source:
            return action(source)
    except Unavailable as exc:
        nothing_given = not (
            opts["coordinators"] or opts["quorum"] or opts["config_file"]
            or os.environ.get(env_name(QUORUM_KEY))
        )  # fmt: skip
        default = " (the default address: nothing was configured)" if nothing_given else ""
        raise click.ClickException(f"{exc.code}: {exc.message}{default}\n{WHERE_HINT}") from exc
    except ClientError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from exc
    except ServiceError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from exc
    except HAError as exc:
        raise click.ClickException(f"ZooKeeper: {exc}") from exc


def _emit(opts: dict[str, Any], data: Any, table: Callable[[Any], None]) -> None:
    if opts["as_json"]:
        click.echo(json.dumps(data, indent=1, sort_keys=True))
    else:
        table(data)


@click.command("leader")
@connection_options
def leader_command(**opts: Any) -> None:
    """Who leads, its term (fencing number) and lease age, and every contender in election order.

    The lease age is how long ago the leader last renewed its lease (by the wall clocks of
    the leader and this machine); followers take over once it exceeds the takeover timeout.
    """
    _emit(opts, with_lease_age(_run(opts, lambda s: s.leader(), read_only=True)),
          tables.leader)  # fmt: skip


def with_lease_age(data: dict[str, Any]) -> dict[str, Any]:
    lead = data.get("leader")
    if lead and lead.get("renewed_ms"):
        lead["lease_age_ms"] = max(0, int(time.time() * 1000) - int(lead["renewed_ms"]))
    return data


@click.group("jobs")
def jobs_group() -> None:
    """Registered jobs."""


@jobs_group.command("list")
@connection_options
def jobs_list(**opts: Any) -> None:
    """Every registered job and its status."""
    _emit(opts, _run(opts, lambda s: s.jobs(), read_only=True), tables.jobs)


@jobs_group.command("show")
@click.argument("job_id")
@connection_options
def jobs_show(job_id: str, **opts: Any) -> None:
    """One job: status, operators, checkpointing options."""
    _emit(opts, _run(opts, lambda s: s.job(job_id), read_only=True), tables.job)


@click.group("checkpoints")
def checkpoints_group() -> None:
    """Checkpoints of a job."""


@checkpoints_group.command("list")
@click.argument("job_id")
@connection_options
def checkpoints_list(job_id: str, **opts: Any) -> None:
    """Counts, latest, history and retained checkpoints of JOB_ID, each with its
    checkpointed and full size."""
    _emit(opts, _run(opts, lambda s: s.checkpoints(job_id), read_only=True), tables.overview)


@checkpoints_group.command("show")
@click.argument("job_id", required=False)
@click.argument("checkpoint_id", type=int, required=False)
@click.option("--job", "job_option", metavar="NAME", help="The job (instead of JOB_ID).")
@connection_options
def checkpoints_show(
    job_id: str | None, checkpoint_id: int | None, job_option: str | None, **opts: Any
) -> None:
    """One checkpoint: status, times, (when retained) its `_metadata`, and its sizes in
    total and per subtask: checkpointed (the bytes it wrote) and full (all the state it
    references, shared files of incremental state included).

    Without CHECKPOINT_ID, the job's latest retained checkpoint.

    \b
    sparkpoint checkpoints show clicks 42
    sparkpoint checkpoints show --job clicks
    """
    if job_id and job_option and job_id != job_option:
        raise click.UsageError(f"two jobs given: {job_id} and --job {job_option}")
    job = job_id or job_option
    if job is None:
        raise click.UsageError("name the job: JOB_ID [CHECKPOINT_ID], or --job NAME")
    if checkpoint_id is None:
        checkpoint_id = int(latest_retained(opts, job)["checkpoint_id"])
    data = _run(opts, lambda s: s.checkpoint(job, checkpoint_id), read_only=True)
    _emit(opts, data, tables.checkpoint)


def latest_retained(opts: dict[str, Any], job_id: str) -> dict[str, Any]:
    """The job's latest retained checkpoint (a pointer as a dict), asked of the cluster."""
    overview = _run(opts, lambda s: s.checkpoints(job_id), read_only=True)
    retained = overview.get("retained") or []
    if not retained:
        raise click.ClickException(f"job {job_id} has no retained checkpoint yet")
    return dict(max(retained, key=lambda p: int(p["checkpoint_id"])))


def pointer_or_job(pointer: str | None, job: str | None, opts: dict[str, Any]) -> str:
    """POINTER as given, or the `_metadata` of ``--job``'s latest retained checkpoint."""
    if (pointer is None) == (job is None):
        raise click.UsageError("give either POINTER or --job NAME")
    if pointer is not None:
        return pointer
    assert job is not None
    return str(latest_retained(opts, job)["metadata_uri"])


def _client_of(source: StatusSource) -> CoordinatorClient:
    if not isinstance(source, ClientSource):
        raise click.ClickException("no coordinator answers; triggers need a leader")
    return source._client


@checkpoints_group.command("trigger")
@click.argument("job_id")
@connection_options
def checkpoints_trigger(job_id: str, **opts: Any) -> None:
    """Trigger a checkpoint of JOB_ID now."""
    cid = _run(opts, lambda s: _client_of(s).trigger_checkpoint(job_id), read_only=False)
    _emit(opts, {"job_id": job_id, "checkpoint_id": cid}, tables.triggered)


@click.group("savepoints")
def savepoints_group() -> None:
    """Savepoints of a job."""


@savepoints_group.command("trigger")
@click.argument("job_id")
@click.option("--target", "target_dir", default=None, help="Directory (state.savepoints.dir).")
@click.option("--stop", is_flag=True, help="Stop the job once the savepoint completes.")
@connection_options
def savepoints_trigger(job_id: str, target_dir: str | None, stop: bool, **opts: Any) -> None:
    """Trigger a savepoint of JOB_ID into --target."""
    cid = _run(
        opts,
        lambda s: _client_of(s).trigger_savepoint(job_id, target_dir, stop=stop),
        read_only=False,
    )
    _emit(opts, {"job_id": job_id, "checkpoint_id": cid, "stop": stop}, tables.triggered)


COMMANDS = [leader_command, jobs_group, checkpoints_group, savepoints_group]
