"""`sparkpoint checkpoints gc` and `sparkpoint jobs cancel`: housekeeping by the leader.

Both go through the leader's API and nowhere else: only a leader that has read the store
decides what is garbage or removes a job, so with no leader they say so and change nothing.
"""

from __future__ import annotations

import json
from typing import Any

import click

from sparkpoint.client import ClientError
from sparkpoint.client.errors import Unavailable
from sparkpoint.ops.cli.status import _client_of, _source, connection_options


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _print_report(report: dict[str, Any]) -> None:
    verb = "would delete" if report["dry_run"] else "deleted"
    click.echo(
        f"leader {report['leader']} (term {report['term']}), grace period "
        f"{report['grace_period_s']:g} s, {report['checkpoint_dir']}"
        + ("  [dry run: nothing deleted]" if report["dry_run"] else "")
    )
    if not report["jobs"]:
        click.echo("no running jobs")
    for job in report["jobs"]:
        click.echo(f"job {job['job_id']}:")
        if job["error"]:
            click.echo(f"  error: {job['error']}")
        click.echo(
            f"  retained {job['retained'] or '-'}, pending {job['pending'] or '-'}, "
            f"next id {job['next_checkpoint_id']}"
        )
        click.echo(
            f"  {verb} {len(job['removed'])} directories ({_human_bytes(job['removed_bytes'])})"
        )
        for orphan in job["removed"]:
            click.echo(f"    {orphan['path']}  {_human_bytes(orphan['size_bytes'])}")
        if job["young"]:
            click.echo(
                f"  kept {len(job['young'])} inside the grace period "
                f"({_human_bytes(job['young_bytes'])})"
            )
            for orphan in job["young"]:
                click.echo(f"    {orphan['path']}  {_human_bytes(orphan['size_bytes'])}")


@click.command("gc")
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@click.option("--job", "job_id", default=None, metavar="ID", help="Only this job.")
@connection_options
def gc_command(dry_run: bool, job_id: str | None, **opts: Any) -> None:
    """Delete orphaned checkpoint directories now (the leader also does it periodically).

    An orphan is a chk-<id> directory of a running job that no retained checkpoint owns,
    whose id is below every checkpoint the leader has pending, and in which nothing changed
    for the grace period (state.checkpoints.orphan-cleanup.grace-period). In shared/
    (incremental state), a file no retained checkpoint references goes once it has been
    unreferenced for the grace period, unless a pending checkpoint's acknowledgement or
    the driver's last acknowledged snapshot references it; --json also lists shared files
    referenced but missing. A job that ended in this term has its shared/ files older
    than the grace period deleted. Savepoints are never touched. Needs the leader.
    """
    try:
        with _source(opts, read_only=False) as source:
            client = _client_of(source)
            report = client.collect_orphans(dry_run=dry_run, job_id=job_id)
    except Unavailable as exc:
        raise click.ClickException(
            f"no leader answers ({exc.message}); orphans are collected only by the leader, "
            "which alone has read the checkpoint store: nothing was deleted"
        ) from exc
    except ClientError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from exc
    except click.ClickException as exc:
        if "triggers need a leader" in exc.message:
            raise click.ClickException(
                "no coordinator answers; orphans are collected only by the leader: "
                "nothing was deleted"
            ) from exc
        raise
    if opts["as_json"]:
        click.echo(json.dumps(report, indent=1, sort_keys=True))
    else:
        _print_report(report)


@click.command("cancel")
@click.argument("job_id")
@connection_options
def cancel_command(job_id: str, **opts: Any) -> None:
    """Cancel JOB_ID for good: pending checkpoints are aborted, and its retained
    checkpoints, checkpoint counter and registry record are removed. Savepoints stay."""
    try:
        with _source(opts, read_only=False) as source:
            reply = _client_of(source).cancel_job(job_id)
    except Unavailable as exc:
        raise click.ClickException(f"no leader answers ({exc.message}): nothing changed") from exc
    except ClientError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from exc
    if opts["as_json"]:
        click.echo(json.dumps(reply, indent=1, sort_keys=True))
    else:
        click.echo(f"job {reply['job_id']}: {reply['status']}")
