"""The I/O half of the chaos drill's checkers: read what a restore would read, and list
what lies in checkpoint storage. The verdicts are the pure functions in
:mod:`sparkpoint.drills.invariants`.

The latest retained checkpoint is loaded exactly as ``sparkpoint metadata inspect
--verify`` does (the `_metadata` read and its checksum, every state file it lists checked
for presence and size), then a restore plan is made from it for the job's registered graph.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.drills.invariants import CheckpointDirectory, RestoreCheck
from sparkpoint.ha import HAError, ZooKeeperConnection
from sparkpoint.metadata import MetadataError
from sparkpoint.recovery import RestoreError, plan_restore
from sparkpoint.storage import (
    METADATA_FILE_NAME,
    CheckpointStorage,
    FileNotFound,
    StorageError,
    check_state_files,
    checkpoint_dir_name,
    filesystem_for,
    load_metadata,
)
from sparkpoint.storage.shared_files import (
    SharedFilesReport,
    check_job_shared_files,
    check_shared_files,
    list_shared_files,
    read_checkpoint,
    shared_directory,
)
from sparkpoint.store import ZooKeeperCompletedCheckpointStore, ZooKeeperJobRegistry

#: Time the leader's collector gets, beyond its grace period and a scan, before what it
#: should have deleted counts as leaked (a loaded machine's scans run late).
LEAK_MARGIN_S = 30.0
PENDING = {"IN_PROGRESS", "FINALIZING", "in_progress", "finalizing", "pending"}


#: How often the latest retained checkpoint is read again when the one just read was
#: subsumed (and deleted) while being read: the job checkpoints on meanwhile.
SUBSUMED_RETRIES = 5


def latest_restore_check(conn: ZooKeeperConnection, job_id: str) -> RestoreCheck:
    """:class:`RestoreCheck` of the latest retained checkpoint. A checkpoint that a newer
    one subsumed while it was being read (its files then go) is not a loss: the newer one
    is checked instead — a slow storage (HDFS) makes that window wider."""
    check = RestoreCheck(None)
    for _ in range(SUBSUMED_RETRIES):
        pointers = retained_pointers(conn, job_id)
        if not pointers:
            return RestoreCheck(None)
        check = _restore_check(conn, job_id, max(pointers, key=lambda p: p.checkpoint_id))
        if check.read_checksum is not None and not check.file_problems:
            return check
        if check.checkpoint_id in {p.checkpoint_id for p in retained_pointers(conn, job_id)}:
            return check  # still retained, and cannot be read: that is a loss
    return check


def _restore_check(
    conn: ZooKeeperConnection, job_id: str, latest: CheckpointPointer
) -> RestoreCheck:
    base = RestoreCheck(latest.checkpoint_id, latest.metadata_uri, latest.metadata_checksum)
    try:
        loaded = load_metadata(latest.metadata_uri)
    except (MetadataError, StorageError) as exc:
        return RestoreCheck(**{**_fields(base), "load_error": str(exc)})
    checks = check_state_files(loaded.checkpoint)
    problems = tuple(f"{c.path}: {c.problem}" for c in checks if not c.ok)
    plan_error, subtasks = "", 0
    record = ZooKeeperJobRegistry(conn, None).get(job_id)
    if record is None:
        plan_error = f"job {job_id} is not registered"
    else:
        try:
            plan = plan_restore(loaded.checkpoint, record.graph)
            subtasks = sum(len(op.subtasks) for op in plan.operators.values())
        except RestoreError as exc:
            plan_error = str(exc)
    return RestoreCheck(
        latest.checkpoint_id, latest.metadata_uri, latest.metadata_checksum,
        read_checksum=loaded.checksum, files=len(checks), file_problems=problems,
        plan_error=plan_error, planned_subtasks=subtasks,
    )  # fmt: skip


def _fields(check: RestoreCheck) -> dict[str, object]:
    return {name: getattr(check, name) for name in RestoreCheck.__slots__}


def checkpoint_directories(
    checkpoint_root: str, job_id: str, now: float | None = None
) -> list[CheckpointDirectory]:
    """``chk-<id>`` directories of one job under ``checkpoint_root`` (a local path or an
    HDFS URI, read through its filesystem), aged by their newest entry (a directory still
    being written to is young)."""
    now_ms = time.time() * 1000 if now is None else now * 1000
    storage = CheckpointStorage(checkpoint_root)
    fs = storage.filesystem(checkpoint_root)
    found = []
    for cid in storage.list_checkpoints(job_id):
        directory = storage.checkpoint_directory(job_id, cid)
        try:
            status = fs.status(directory)
            entries = fs.list(directory)
        except FileNotFound:
            continue  # removed while looking: not an orphan
        newest = max([status.modification_time_ms, *(e.modification_time_ms for e in entries)])
        has_files = any(not e.is_dir for e in entries)
        found.append(CheckpointDirectory(cid, (now_ms - newest) / 1000, has_files, directory))
    return found


def metadata_written_after(checkpoint_root: str, wall_time: float) -> list[str]:
    """``<job>/chk-<id>/_metadata`` files under ``checkpoint_root`` last modified after
    ``wall_time`` (seconds since the epoch)."""
    fs = filesystem_for(checkpoint_root)
    try:
        jobs = [e.name for e in fs.list(checkpoint_root) if e.is_dir]
    except FileNotFound:
        return []
    storage = CheckpointStorage(checkpoint_root)
    written = []
    for job_id in jobs:
        for cid in storage.list_checkpoints(job_id):
            metadata = f"{storage.checkpoint_directory(job_id, cid)}/{METADATA_FILE_NAME}"
            try:
                modified_ms = fs.status(metadata).modification_time_ms
            except FileNotFound:
                continue
            if modified_ms > wall_time * 1000:
                written.append(f"{job_id}/{checkpoint_dir_name(cid)}/{METADATA_FILE_NAME}")
    return sorted(written)


def pending_ids(addresses: list[str], job_id: str) -> set[int] | None:
    """Ids the leader has in flight (None: no leader answered). Asked of each replica in
    turn: a follower answers too, from ZooKeeper, with no history (``source`` says
    ``zookeeper``), and would make every checkpoint look settled."""
    for address in addresses:
        try:
            with CoordinatorClient([address], timeout_s=2.0, retry_for_s=0.0) as client:
                overview = client.checkpoints(job_id)
        except (ClientError, HAError):
            continue
        if overview.get("source") == "leader":
            history = overview.get("history", [])
            return {int(r["id"]) for r in history if str(r.get("status")) in PENDING}
    return None


def retained_pointers(conn: ZooKeeperConnection, job_id: str) -> list[CheckpointPointer]:
    return ZooKeeperCompletedCheckpointStore(conn, job_id, None).recover()


def shared_files_report(
    checkpoint_dir: str,
    job_id: str,
    retained: list[CheckpointPointer],
    grace_s: float,
    now: float | None = None,
) -> SharedFilesReport:
    """The job's ``shared/`` against what the retained checkpoints' `_metadata` files
    reference, by the checker of ``sparkpoint checkpoints shared-check``. A `_metadata`
    that cannot be read raises :class:`StorageError` / :class:`MetadataError`."""
    now = time.time() if now is None else now
    checkpoints = [read_checkpoint(filesystem_for(p.metadata_uri), p.metadata_uri)
                   for p in retained]  # fmt: skip
    return check_job_shared_files(filesystem_for(checkpoint_dir), checkpoint_dir, job_id,
                                  checkpoints, now_ms=int(now * 1000),
                                  grace_ms=grace_s * 1000)  # fmt: skip


def jobs_shared_files_report(
    conn: ZooKeeperConnection, checkpoint_dir: str, job_ids: list[str], grace_s: float
) -> SharedFilesReport:
    """:func:`shared_files_across_jobs` of the jobs' retained checkpoints in ZooKeeper."""
    retained = {job_id: retained_pointers(conn, job_id) for job_id in job_ids}
    return shared_files_across_jobs(checkpoint_dir, retained, grace_s)


def shared_files_across_jobs(
    checkpoint_dir: str,
    retained: Mapping[str, list[CheckpointPointer]],
    grace_s: float,
    now: float | None = None,
) -> SharedFilesReport:
    """:func:`shared_files_report` over several jobs at once: the ``shared/`` of each
    against what the retained checkpoints of all of them reference. A job started from
    another's checkpoint may reference that job's files: a file is missing only when no
    job's ``shared/`` holds it, unreferenced only when no job's checkpoint names it."""
    now = time.time() if now is None else now
    fs = filesystem_for(checkpoint_dir)
    checkpoints = [read_checkpoint(filesystem_for(p.metadata_uri), p.metadata_uri)
                   for pointers in retained.values() for p in pointers]  # fmt: skip
    directories = [shared_directory(checkpoint_dir, job_id) for job_id in retained]
    listing = [f for directory in directories for f in list_shared_files(fs, directory)]
    where = directories[0] if len(directories) == 1 else checkpoint_dir
    return check_shared_files(where, listing, checkpoints, now_ms=int(now * 1000),
                              grace_ms=grace_s * 1000)  # fmt: skip


def settled_shared_files_report(
    conn: ZooKeeperConnection,
    checkpoint_dir: str,
    job_ids: list[str],
    grace_s: float,
    within_s: float,
) -> SharedFilesReport:
    """:func:`jobs_shared_files_report` once it holds, or as it is after ``within_s``. At
    the end of a drill the last checkpoints have just subsumed older ones: their files
    are unreferenced only from now on, and the leader's collector deletes them a grace
    period (and a scan) later."""
    deadline = time.monotonic() + within_s
    while True:
        report = jobs_shared_files_report(conn, checkpoint_dir, job_ids, grace_s)
        if report.ok or time.monotonic() > deadline:
            return report
        time.sleep(0.5)
