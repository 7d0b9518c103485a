"""`sparkpoint jobs rescale`: ask a running job to change its parallelism (docs/operations.md,
"Rescaling a running job"), and with ``--wait`` wait until its driver says when it took
effect. The request goes to the leader, which stores it with the job in ZooKeeper."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.client.errors import Unavailable
from sparkpoint.ops.cli.status import _client_of, _run, connection_options

#: Between two reads of the job while waiting: a polling interval, not a synchronisation.
_POLL_S = 0.5


@click.command("rescale")
@click.option("--job", "job_id", required=True, metavar="ID", help="The running job.")
@click.option("--parallelism", type=int, required=True, help="1 to the job's max parallelism.")
@click.option("--wait", is_flag=True, help="Wait until the job's driver applied it.")
@click.option(
    "--timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds --wait waits (the request stays pending after).",
)
@connection_options
def rescale_command(job_id: str, parallelism: int, wait: bool, timeout: float, **opts: Any) -> None:
    """Run job --job at --parallelism from its next epoch boundary: its driver completes a
    checkpoint and goes on from it at the new parallelism. The request is kept in
    ZooKeeper until the driver applied it (a change of leader or of driver keeps it);
    a later request replaces one still pending. With --wait: the epoch and checkpoint at
    which it took effect."""

    def ask(source: Any) -> dict[str, Any]:
        client = _client_of(source)
        asked = client.rescale(job_id, parallelism)
        return _wait_applied(client, job_id, asked, timeout) if wait else asked

    reply = _run(opts, ask, read_only=False)
    if opts["as_json"]:
        click.echo(json.dumps(reply, indent=1, sort_keys=True))
    elif reply["state"] == "applied":
        click.echo(
            f"job {job_id}: at parallelism {reply['parallelism']} after epoch {reply['epoch']}, "
            f"from checkpoint {reply['checkpoint_id']} (request {reply['request_id']})"
        )
    elif reply["state"] == "unchanged":
        click.echo(f"job {job_id}: already at parallelism {parallelism}; nothing to do")
    else:
        click.echo(
            f"job {job_id}: rescale to {parallelism} requested (request {reply['request_id']}); "
            f"its driver applies it at the next epoch boundary"
        )


def _wait_applied(
    client: CoordinatorClient, job_id: str, asked: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    """The request as the job's record holds it once applied; a clear error when it was
    replaced, the job ended, or ``timeout_s`` passed (the request then stays pending)."""
    if asked["state"] != "pending":
        return asked
    request_id, deadline = asked["request_id"], time.monotonic() + timeout_s
    while True:
        try:
            job = client.job(job_id)
        except Unavailable:
            job = None  # no leader for a moment: the request is in ZooKeeper, ask again
        except ClientError as exc:
            if exc.code == "unknown_job":
                raise click.ClickException(f"job {job_id} ended before it rescaled") from exc
            raise
        last = (job or {}).get("rescale") or {}
        if last.get("request_id") not in (None, request_id):
            raise click.ClickException(
                f"job {job_id}: request {request_id} was replaced by request "
                f"{last['request_id']} (to parallelism {last['parallelism']})"
            )
        if last.get("state") == "applied":
            return {"job_id": job_id, **last}
        if job is not None and job.get("status") in ("FINISHED", "CANCELED", "FAILED"):
            raise click.ClickException(f"job {job_id} is {job['status']}: it did not rescale")
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"job {job_id}: rescale to {asked['parallelism']} not applied within "
                f"{timeout_s:g} s; request {request_id} stays pending (is its driver running?)"
            )
        time.sleep(_POLL_S)
