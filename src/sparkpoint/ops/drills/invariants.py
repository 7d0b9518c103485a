"""The drills' invariants as pure functions of what was observed (no I/O), so each can be
tested on hand-made histories — including ones that break it.

Each check returns an :class:`Invariant`: its name, whether it held, and what broke it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from sparkpoint.storage.shared_files import SharedFilesReport

SINGLE_LEADER = "single_leader"
IDS_RISING = "ids_strictly_rising"
NO_ID_REUSED = "no_id_reused"
RETAINED_KEPT = "no_retained_checkpoint_lost"
EXACTLY_ONCE = "exactly_once_output"


@dataclass(frozen=True, slots=True)
class Invariant:
    name: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class LeaderSample:
    """One look at the cluster: the epoch in a valid ``leader/info`` (None: no leader) and
    the replicas that said, each in its own ``GET /v1/leader``, that they lead *and can act*
    (state ``leader`` and ready: a leader whose lease lapsed or whose connection is
    suspended is not ready, so it cannot trigger or complete anything)."""

    at_s: float
    epoch: int | None
    acting: tuple[str, ...] = field(default_factory=tuple)


def check_single_leader(samples: Sequence[LeaderSample]) -> Invariant:
    """At most one acting leader in every sample, and the published epoch never goes back
    (a lower epoch after a higher one would mean a deposed leader published again)."""
    problems: list[str] = []
    highest: int | None = None
    for s in samples:
        if len(s.acting) > 1:
            problems.append(f"t={s.at_s:.2f}s: {len(s.acting)} acting leaders {list(s.acting)}")
        if s.epoch is not None:
            if highest is not None and s.epoch < highest:
                problems.append(f"t={s.at_s:.2f}s: term {s.epoch} after term {highest}")
            highest = s.epoch if highest is None else max(highest, s.epoch)
    return _result(SINGLE_LEADER, problems, f"{len(samples)} samples")


def check_ids_rising(ids_in_completion_order: Sequence[int]) -> Invariant:
    """Checkpoint ids, in the order their completions were first seen, rise strictly and
    none appears twice. Two leaders acting at once (the thing fencing rules out) would show
    as an id issued twice or a completion below one already seen."""
    problems: list[str] = []
    twice = sorted(i for i, n in Counter(ids_in_completion_order).items() if n > 1)
    if twice:
        problems.append(f"ids completed more than once: {twice[:10]}")
    for before, after in pairwise(ids_in_completion_order):
        if after <= before:
            problems.append(f"id {after} completed after id {before}")
    return _result(IDS_RISING, problems, f"{len(ids_in_completion_order)} completions")


def check_no_id_reused(ids_before: Sequence[int], ids_after: Sequence[int]) -> Invariant:
    """Every checkpoint id first seen completed after a fault (the quorum back) is above
    every id seen completed before it. ``ids_before`` must be read before the fault and
    ``ids_after`` be those first seen after it, by one clock: a completion seen before
    the fault can then never count as after it."""
    highest = max(ids_before, default=0)
    reused = [cid for cid in ids_after if cid <= highest]
    if reused:
        return Invariant(NO_ID_REUSED, False, f"reused {reused}")
    return Invariant(NO_ID_REUSED, True, f"{len(ids_after)} new ids, all above {highest}")


def check_retained_kept(before: Iterable[int], after: Iterable[int]) -> Invariant:
    """Every checkpoint retained before the failure is still retained afterwards, or was
    subsumed by a newer retained one (retention drops the oldest only when a newer one is
    added). A retained checkpoint vanishing with nothing newer is a lost checkpoint."""
    after_set = set(after)
    newest = max(after_set, default=None)
    lost = sorted(
        cid for cid in set(before) if cid not in after_set and (newest is None or newest <= cid)
    )
    problems = [f"retained checkpoints lost: {lost}"] if lost else []
    return _result(
        RETAINED_KEPT, problems, f"before {sorted(set(before))}, after {sorted(after_set)}"
    )


def check_exactly_once(committed: Sequence[str], expected: Sequence[str]) -> Invariant:
    """The sink's committed lines equal, as a multiset, the lines the pipeline's offline
    function computes from the input it consumed: nothing lost, nothing twice."""
    have, want = Counter(committed), Counter(expected)
    missing, extra = want - have, have - want
    problems = []
    if missing:
        problems.append(f"{sum(missing.values())} expected lines missing")
    if extra:
        problems.append(f"{sum(extra.values())} lines extra or duplicated")
    return _result(EXACTLY_ONCE, problems, f"{len(committed)} committed, {len(expected)} expected")


def clicks_read_per_split(committed: Iterable[str], splits: int) -> int:
    """The records per split the clicks job has read, from its committed output: every
    click commits exactly one running-total line (``"type": "total"``) and the splits
    advance together. Output lost or committed twice skews it, and the exactly-once check
    against the offline output for that input then reports lines missing or extra."""
    totals = sum(1 for line in committed if json.loads(line).get("type") == "total")
    return -(-totals // splits)


def _result(name: str, problems: list[str], summary: str) -> Invariant:
    if problems:
        shown = "; ".join(problems[:5]) + (
            f"; … {len(problems) - 5} more" if len(problems) > 5 else ""
        )
        return Invariant(name, False, shown)
    return Invariant(name, True, summary)


# --- the chaos drill's checkers ------------------------------------------------------------

COMPLETIONS_UNIQUE = "each_checkpoint_completed_once"
RUNS_TAKE_TURNS = "one_driver_run_completes_at_a_time"
LATEST_RESTORABLE = "latest_checkpoint_restorable"
NO_STALE_DIRECTORIES = "no_checkpoint_directory_outlives_grace"


@dataclass(frozen=True, slots=True)
class CompletionNotice:
    """A completion as a driver was told it (one per notice received, never merged)."""

    checkpoint_id: int
    metadata_uri: str | None
    receiver: str = ""  # which driver run heard it (a process id, a thread name)


def check_completions_unique(notices: Sequence[CompletionNotice]) -> Invariant:
    """Every checkpoint id is announced complete once, with one pointer. The notices are
    counted as received: an id announced twice — to one driver or to two — means two
    leaders (or one leader twice) finalised it, and two different `_metadata` locations
    for one id mean two different cuts share it."""
    problems: list[str] = []
    by_id: dict[int, list[CompletionNotice]] = {}
    for n in notices:
        by_id.setdefault(n.checkpoint_id, []).append(n)
    for cid, seen in sorted(by_id.items()):
        uris = sorted({str(n.metadata_uri) for n in seen})
        if len(uris) > 1:
            problems.append(f"checkpoint {cid} completed with {len(uris)} pointers {uris}")
        elif len(seen) > 1:
            receivers = sorted({n.receiver for n in seen})
            problems.append(f"checkpoint {cid} completed {len(seen)} times (to {receivers})")
    return _result(COMPLETIONS_UNIQUE, problems,
                   f"{len(notices)} completion notices, {len(by_id)} ids")  # fmt: skip


def check_runs_take_turns(notices: Sequence[CompletionNotice]) -> Invariant:
    """Each driver run's completed checkpoints form an id range no other run's fall into.
    Runs take turns — the leader ends one (the run-id fence) before it grants the next —
    so two runs completing checkpoints in the same period would interleave their ids."""
    ranges: dict[str, tuple[int, int]] = {}
    for n in notices:
        low, high = ranges.get(n.receiver, (n.checkpoint_id, n.checkpoint_id))
        ranges[n.receiver] = (min(low, n.checkpoint_id), max(high, n.checkpoint_id))
    ordered = sorted(ranges.items(), key=lambda item: item[1])
    problems = [
        f"{later} completed {low2}..{high2} while {earlier} completed {low1}..{high1}"
        for (earlier, (low1, high1)), (later, (low2, high2)) in pairwise(ordered)
        if low2 <= high1
    ]
    return _result(RUNS_TAKE_TURNS, problems,
                   f"{len(ranges)} driver runs: " + ", ".join(
                       f"{low}..{high}" for _, (low, high) in ordered))  # fmt: skip


@dataclass(frozen=True, slots=True)
class RestoreCheck:
    """What was found when loading the latest retained checkpoint as a restore would:
    the pointer in ZooKeeper, the `_metadata` it names, every state file it lists, and
    the restore plan made from it for the job's graph."""

    checkpoint_id: int | None  # None: nothing retained
    metadata_uri: str = ""
    recorded_checksum: str = ""
    read_checksum: str | None = None  # None: `_metadata` could not be read
    load_error: str = ""
    files: int = 0
    file_problems: tuple[str, ...] = ()
    plan_error: str = ""
    planned_subtasks: int = 0


def check_latest_restorable(check: RestoreCheck, *, expect_one: bool = True) -> Invariant:
    """The latest retained checkpoint loads, matches the checksum recorded at completion,
    has every state file it lists at its recorded size, and yields a restore plan."""
    problems: list[str] = []
    if check.checkpoint_id is None:
        if expect_one:
            problems.append("no retained checkpoint to restore from")
        return _result(LATEST_RESTORABLE, problems, "nothing retained")
    where = f"checkpoint {check.checkpoint_id} ({check.metadata_uri})"
    if check.read_checksum is None:
        problems.append(f"{where}: cannot load: {check.load_error or 'unreadable'}")
    elif check.recorded_checksum and check.read_checksum != check.recorded_checksum:
        problems.append(f"{where}: _metadata checksum {check.read_checksum}, recorded "
                        f"{check.recorded_checksum}")  # fmt: skip
    if check.file_problems:
        problems.append(f"{where}: {len(check.file_problems)} of {check.files} state files "
                        f"bad: {list(check.file_problems[:3])}")  # fmt: skip
    if check.read_checksum is not None and check.plan_error:
        problems.append(f"{where}: no restore plan: {check.plan_error}")
    return _result(LATEST_RESTORABLE, problems,
                   f"checkpoint {check.checkpoint_id}: {check.files} state files verified, "
                   f"plan for {check.planned_subtasks} subtasks")  # fmt: skip


@dataclass(frozen=True, slots=True)
class CheckpointDirectory:
    checkpoint_id: int
    age_s: float  # since anything in it last changed
    has_files: bool = True
    path: str = ""


def check_no_stale_directories(
    directories: Sequence[CheckpointDirectory],
    retained: Iterable[int],
    pending: Iterable[int],
    grace_s: float,
    unretained_for_s: Mapping[int, float] | None = None,
) -> Invariant:
    """No ``chk-<id>`` directory older than the grace period unless ZooKeeper retains it,
    the leader has it pending, or the running job may still use it (the newest directory,
    and the newest one holding files: the driver's latest snapshot, completed or not —
    docs/architecture.md): anything else is an orphan the collector should have removed
    (a failover's half-written checkpoint, a declined or expired one).

    ``unretained_for_s``: how long ago each id was last seen retained. A checkpoint is an
    orphan only from when it stopped being retained: one subsumed a moment ago is young,
    however long ago its files were written."""
    since = unretained_for_s or {}
    keep = set(retained) | set(pending)
    if directories:
        keep.add(max(d.checkpoint_id for d in directories))
    with_files = [d.checkpoint_id for d in directories if d.has_files]
    if with_files:
        keep.add(max(with_files))
    stale = sorted(
        (
            d
            for d in directories
            if d.checkpoint_id not in keep
            and min(d.age_s, since.get(d.checkpoint_id, d.age_s)) > grace_s
        ),
        key=lambda d: d.checkpoint_id,
    )
    problems = [f"{len(stale)} orphan directories older than {grace_s:g} s: "
                + ", ".join(f"chk-{d.checkpoint_id} ({d.age_s:.0f} s)" for d in stale[:8])
                ] if stale else []  # fmt: skip
    return _result(NO_STALE_DIRECTORIES, problems,
                   f"{len(directories)} directories, kept {sorted(keep)[-5:]}")  # fmt: skip


# --- incremental keyed state ---------------------------------------------------------------

SHARED_FILES_KEPT = "shared_files_referenced_and_collected"


def check_shared_files_kept(report: SharedFilesReport, grace_s: float) -> Invariant:
    """Every shared file a retained checkpoint references is there, and none is left that
    no retained checkpoint references beyond the grace period — the verdict of
    ``sparkpoint checkpoints shared-check`` on the job's ``shared/``."""
    problems = [f"{len(report.missing)} referenced shared files missing: "
                + ", ".join(report.missing[:3])] if report.missing else []  # fmt: skip
    if report.garbage:
        problems.append(f"{len(report.garbage)} unreferenced beyond {grace_s:g} s: "
                        + ", ".join(f.path for f in report.garbage[:3]))  # fmt: skip
    return _result(SHARED_FILES_KEPT, problems,
                   f"{len(report.referenced)} referenced, {len(report.young)} unreferenced "
                   f"within {grace_s:g} s")  # fmt: skip


# --- savepoints, other jobs' checkpoints, slow acknowledgements -----------------------------

OUTPUT_ONCE = "no_output_committed_twice"
SHARED_FILES_EXIST = "referenced_shared_files_exist"
RESTORES_OWN_CHECKPOINT = "second_job_restores_its_own_checkpoint"
TIMEOUT_ABOVE_GRACE_REFUSED = "checkpoint_timeout_above_grace_refused"
CLAIM_OF_OTHER_JOB_REFUSED = "claim_of_another_jobs_checkpoint_refused"


def check_output_committed_once(lines: Sequence[str]) -> Invariant:
    """No line of a job's committed output twice, while the job runs. Every line of the
    demo pipeline's output is unique (a user's running count, a session's start), as is
    every row id of the Kafka workload's output topic, so one seen twice is output
    committed twice: a restore that replayed what a commit had already made visible
    (say, a savepoint's)."""
    twice = sorted(line for line, n in Counter(lines).items() if n > 1)
    problems = [f"{len(twice)} lines committed more than once: {[t[:120] for t in twice[:2]]}"
                ] if twice else []  # fmt: skip
    return _result(OUTPUT_ONCE, problems, f"{len(lines)} committed lines, each once")


def check_shared_files_exist(report: SharedFilesReport) -> Invariant:
    """Every shared file a retained checkpoint references is there — of every job that
    may reference another's files (a job started from another job's checkpoint), with
    the report made over all of them. What the collector has still to delete is not
    judged here (see :func:`check_shared_files_kept`): this holds at every moment."""
    problems = [f"{len(report.missing)} referenced shared files missing: "
                + ", ".join(f"{p} (checkpoints {list(report.referenced.get(p, ()))})"
                            for p in report.missing[:3])] if report.missing else []  # fmt: skip
    return _result(SHARED_FILES_EXIST, problems,
                   f"{len(report.referenced)} referenced shared files, all there")  # fmt: skip


def check_restored_own_checkpoint(
    job_id: str, retained: int | None, restored: int | None, checkpointed: bool, why: str = ""
) -> Invariant:
    """A job started from another job's checkpoint, killed and started again, restores
    from its own latest retained checkpoint (``retained``, read before the restart) and
    completes a checkpoint from there. ``why``: what its driver said, if it gave up."""
    problems = []
    if retained is None:
        problems.append(f"{job_id} retained no checkpoint of its own")
    elif restored != retained:
        problems.append(f"{job_id} restored {restored}, not its retained checkpoint {retained}")
    if not checkpointed:
        problems.append(f"{job_id} completed no checkpoint after the restore"
                        + (f" ({why})" if why else ""))  # fmt: skip
    return _result(RESTORES_OWN_CHECKPOINT, problems,
                   f"{job_id} restored checkpoint {restored} and checkpointed on")  # fmt: skip


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What the leader answered to a request: accepted (``status`` None) or refused with
    an HTTP status and message."""

    status: int | None
    message: str = ""


def check_timeout_above_grace_refused(
    outcome: RequestOutcome, timeout_s: float, grace_s: float
) -> Invariant:
    """A job whose checkpoint timeout exceeds the orphan grace period is refused at
    registration, with a client error naming the timeout and the grace period: a
    checkpoint's files could otherwise outlive the grace unacknowledged and be
    collected under a checkpoint that then completes."""
    asked = f"timeout {timeout_s:g} s above the grace period {grace_s:g} s"
    if outcome.status is None:
        return Invariant(TIMEOUT_ABOVE_GRACE_REFUSED, False, f"{asked}: accepted")
    text = outcome.message.lower()
    clear = 400 <= outcome.status < 500 and "timeout" in text and "grace" in text
    return Invariant(TIMEOUT_ABOVE_GRACE_REFUSED, clear,
                     f"{asked}: {outcome.status} {outcome.message[:200]}"
                     + ("" if clear else " (not a client error naming both)"))  # fmt: skip


def check_claim_of_other_job_refused(outcome: RequestOutcome, job_id: str, owner: str) -> Invariant:
    """A restore that would claim another job's checkpoint (own its files, and so let
    this job's collector delete what the owner still references) is refused with a
    client error naming both jobs."""
    asked = f"{job_id} claiming a checkpoint of {owner}"
    if outcome.status is None:
        return Invariant(CLAIM_OF_OTHER_JOB_REFUSED, False, f"{asked}: accepted")
    clear = 400 <= outcome.status < 500 and job_id in outcome.message and owner in outcome.message
    return Invariant(CLAIM_OF_OTHER_JOB_REFUSED, clear,
                     f"{asked}: {outcome.status} {outcome.message[:200]}"
                     + ("" if clear else " (not a client error naming both jobs)"))  # fmt: skip
