"""`sparkpoint checkpoints shared-check`: the checker of a job's ``shared/`` directory,
offline (no coordinator needed): shared files referenced but missing, and files that
nothing references beyond the grace period."""

from __future__ import annotations

import json
import time

import click

from sparkpoint.metadata import MetadataError
from sparkpoint.storage import METADATA_FILE_NAME, StorageError, filesystem_for
from sparkpoint.storage.shared_files import check_job_shared_files, read_checkpoint
from sparkpoint.storage.uri import parse


@click.command("shared-check")
@click.argument("checkpoint_dir")
@click.argument("job_id")
@click.option(
    "--grace", "grace_s", type=float, default=3600.0, show_default=True,
    help="Seconds a file may stay unreferenced (state.checkpoints.orphan-cleanup.grace-period).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def shared_check_command(checkpoint_dir: str, job_id: str, grace_s: float, as_json: bool) -> None:
    """Check CHECKPOINT_DIR/JOB_ID/shared against the checkpoints there.

    Every chk-<id> directory with a _metadata counts as referencing its files (run it
    after `sparkpoint checkpoints gc`, when only retained checkpoints have one). Exits 1
    when a referenced file is missing or an unreferenced one is older than --grace.
    """
    job = parse(checkpoint_dir).child(job_id)
    try:
        fs = filesystem_for(str(job))
        checkpoints = []
        for entry in fs.list(str(job)):
            if entry.is_dir and entry.name.startswith("chk-"):
                metadata = str(parse(entry.path).child(METADATA_FILE_NAME))
                if fs.exists(metadata):
                    checkpoints.append(read_checkpoint(fs, metadata))
        report = check_job_shared_files(
            fs,
            checkpoint_dir,
            job_id,
            checkpoints,
            now_ms=time.time_ns() // 1_000_000,
            grace_ms=grace_s * 1000,
        )
    except (StorageError, MetadataError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps({"ok": report.ok, **report.to_dict()}, indent=1, sort_keys=True))
    else:
        click.echo(
            f"{report.directory}: {len(report.referenced)} referenced by {len(checkpoints)} "
            f"checkpoints, {len(report.missing)} missing, {len(report.garbage)} unreferenced "
            f"beyond {grace_s:g} s, {len(report.young)} unreferenced within it"
        )
        for path in report.missing:
            click.echo(f"  missing  {path}  (checkpoints {list(report.referenced[path])})")
        for f in report.garbage:
            click.echo(f"  garbage  {f.path}  ({f.size} bytes)")
    if not report.ok:
        raise SystemExit(1)
