"""The leader's collector of orphaned checkpoint directories (docs/architecture.md §12).

Every failover and every crash between state files and `_metadata` leaves a ``chk-<id>``
directory that no completed checkpoint owns; so does a discard that did not finish. The
leader of a term, and only it, deletes them: it has read the job's store, so it knows
what is retained, and it knows what it has pending itself. A directory of a job is
garbage when

- no retained checkpoint has its id (the store as the leader knows it, and as ZooKeeper
  holds it now: a fresh read, in which a pointer that cannot be decoded — a newer format
  during a rolling upgrade, a damaged znode — still protects the id its name gives; it is
  reported by a log line, ``sparkpoint_orphan_undecodable_pointers`` and an alert),
- it is not the checkpoint the job's current run was restored from (until a newer one
  completes, a restoring driver may still be reading it),
- its id is below every id this term has pending and below the counter's next id,
- its id is below the newest retained checkpoint: a driver reads its running state back
  from its latest snapshot whether or not that checkpoint completed (one pending when a
  leader died is never completed, yet is what the driver's next snapshot job reads), and
  only a newer *completed* checkpoint proves the driver has moved past it (it acknowledged
  a later snapshot, and switched to it, before that checkpoint could complete),
- it is not the newest directory, nor the newest one holding files: a driver may still be
  writing into the first, and reads its running state back from the second (its latest
  snapshot, completed or not) until a newer snapshot replaces it,
- nothing in it changed for the grace period (``state.checkpoints.orphan-cleanup.
  grace-period``): whoever might still write into it — a driver finishing a snapshot for
  a checkpoint of the previous term — has long stopped.

The counter, the pending ids and the store are read in that order: any id issued after
the counter read is above it, anything pending at the second read is kept, and a
checkpoint that completed meanwhile left pending only once its pointer was in the store,
where the third read finds it.
Savepoints live elsewhere and anything else not named ``chk-<n>`` is never looked at,
except ``shared/``: its files that no retained checkpoint references are deleted once
unreferenced for the grace period in this term (storage/shared_files.py), unless the
states this term's coordinator holds reference them — the acknowledgements of its
pending checkpoints (each completes up to the checkpoint timeout after its trigger) and
those of the snapshot the driver acknowledged last (it rebuilds a lost executor's state
from it, completed or not). Those are read with the pending ids. A job that ended in
this term (its session stays, so its driver hears how it ended) has its ``shared/``
emptied of files older than the grace period: ending it queued that already, and this
retries a deletion that failed. A follower has no term and so no collector: it deletes
nothing.

The collector runs on its own thread every ``state.checkpoints.orphan-cleanup.interval``,
never on the tick loop, so deleting (slow on HDFS) never holds up a trigger or an ack.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sparkpoint import metrics
from sparkpoint.coordinator.storage_api import STORAGE_FAILURES
from sparkpoint.ha import HAError
from sparkpoint.service.backend import ListedIds
from sparkpoint.storage import OrphanDirectory
from sparkpoint.storage.shared_files import (
    SharedFileCollector,
    ended_job_shared_files,
    remove_ended_job_shared_files,
)

if TYPE_CHECKING:
    from sparkpoint.runs.session import JobSession
    from sparkpoint.storage import CheckpointStorage

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class JobOrphans:
    """One job's scan: what the rules saw and what they decided."""

    job_id: str
    retained: tuple[int, ...] = ()
    pending: tuple[int, ...] = ()
    next_checkpoint_id: int | None = None
    #: Orphans past the grace period: deleted (or, in a dry run, to be deleted).
    removed: tuple[OrphanDirectory, ...] = ()
    #: Orphans still inside the grace period: kept for now.
    young: tuple[OrphanDirectory, ...] = ()
    error: str | None = None
    #: ``shared/``: files referenced but missing, garbage (removed unless a dry run), young.
    shared: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "retained": list(self.retained),
            "pending": list(self.pending),
            "next_checkpoint_id": self.next_checkpoint_id,
            "removed": [o.to_dict() for o in self.removed],
            "removed_bytes": sum(o.size_bytes for o in self.removed),
            "young": [o.to_dict() for o in self.young],
            "young_bytes": sum(o.size_bytes for o in self.young),
            "error": self.error,
            "shared": self.shared,
        }


@dataclass(frozen=True, slots=True)
class CollectionReport:
    dry_run: bool
    epoch: int
    grace_period_s: float
    checkpoint_dir: str
    jobs: tuple[JobOrphans, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "term": self.epoch,
            "epoch": self.epoch,  # deprecated alias of "term"
            "grace_period_s": self.grace_period_s,
            "checkpoint_dir": self.checkpoint_dir,
            "jobs": [job.to_dict() for job in self.jobs],
        }


class CollectingTerm(Protocol):
    """What the collector needs of the leadership term it works for."""

    epoch: int
    closed: bool
    ready: threading.Event
    storage: CheckpointStorage

    def sessions(self) -> list[JobSession]: ...

    def listed_now(self, job_id: str) -> ListedIds: ...

    def may_act(self) -> bool:
        """Whether the term still leads (may delete)."""
        ...


class OrphanCollector:
    """Collects the orphans of every job of one term. Thread-safe: a scan requested over
    the API and the periodic one never run at the same time."""

    def __init__(
        self,
        term: CollectingTerm,
        *,
        grace_period_s: float,
        interval_s: float,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._term = term
        self.grace_period_s = grace_period_s
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shared = SharedFileCollector()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"sparkpoint-orphans-{self._term.epoch}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop after the directory being deleted (never blocks on the thread). The gauges
        go too: only a leader reports orphans."""
        self._stop.set()
        for session in self._term.sessions():
            for gauge in (metrics.ORPHAN_DIRECTORIES, metrics.ORPHAN_BYTES):
                with contextlib.suppress(KeyError):
                    gauge.remove(session.job_id)

    def collect(self, *, dry_run: bool, job_ids: Iterable[str] | None = None) -> CollectionReport:
        """Scan every job of the term (or ``job_ids``); delete what is garbage unless
        ``dry_run``. A job that cannot be scanned is reported with its error, not raised."""
        term = self._term
        wanted = set(job_ids) if job_ids is not None else None
        with self._lock:
            sessions = [s for s in term.sessions() if wanted is None or s.job_id in wanted]
            jobs = tuple(
                self._collect_ended_job(s, dry_run=dry_run)
                if s.job_status().is_globally_terminal
                else self._collect_job(s, dry_run=dry_run)
                for s in sessions
            )
            metrics.ORPHAN_SCANS.inc()
        return CollectionReport(
            dry_run=dry_run,
            epoch=term.epoch,
            grace_period_s=self.grace_period_s,
            checkpoint_dir=term.storage.checkpoint_dir,
            jobs=jobs,
        )

    # --- internals ------------------------------------------------------------------------

    def _run(self) -> None:
        term = self._term
        while not self._stop.wait(self._interval_s):
            if term.closed:
                return
            if not term.ready.is_set() or not term.may_act():
                continue
            try:
                self.collect(dry_run=False)
            except Exception:  # a bug must not end the thread and let orphans pile up
                log.exception("orphan collection of term %d failed", term.epoch)

    def _report_undecodable(self, job_id: str, listed: ListedIds) -> JobOrphans | None:
        """Pointers the store lists but this replica cannot decode are kept like any other
        (their directories are the checkpoints they point to); say so loudly. When a name
        gives no id either, nothing of the job can be told apart from garbage: the scan
        deletes nothing and says why."""
        metrics.ORPHAN_UNDECODABLE_POINTERS.labels(job_id=job_id).set(len(listed.undecodable))
        log.error(
            "job %s: the store lists checkpoint pointers this coordinator cannot decode (%s); "
            "their directories are kept until the pointers are readable or removed",
            job_id,
            ", ".join(sorted(listed.undecodable)),
        )
        if listed.complete:
            return None
        return JobOrphans(
            job_id,
            retained=tuple(sorted(listed.ids)),
            error="a checkpoint pointer's name gives no id: nothing of the job is collected",
        )

    def _delete(
        self, job_id: str, old: list[OrphanDirectory]
    ) -> tuple[list[OrphanDirectory], str | None]:
        """Delete ``old`` while the term leads; what was removed, and the last error."""
        term = self._term
        removed: list[OrphanDirectory] = []
        error = None
        for orphan in old:
            if self._stop.is_set() or term.closed or not term.may_act():
                error = "leadership lost during the scan; the rest is left for the next leader"
                break
            try:
                term.storage.delete_orphan(job_id, orphan)
            except STORAGE_FAILURES as exc:
                metrics.ORPHAN_SCAN_FAILURES.labels(job_id=job_id).inc()
                log.warning("could not delete orphan %s: %s", orphan.path, exc)
                error = f"{type(exc).__name__}: {exc}"
                continue
            removed.append(orphan)
            metrics.ORPHAN_DIRECTORIES_REMOVED.labels(job_id=job_id).inc()
            metrics.ORPHAN_BYTES_REMOVED.labels(job_id=job_id).inc(orphan.size_bytes)
            log.info("deleted orphaned checkpoint directory %s (%d bytes)",
                     orphan.path, orphan.size_bytes)  # fmt: skip
        return removed, error

    def _collect_ended_job(self, session: JobSession, *, dry_run: bool) -> JobOrphans:
        """An ended job: its store and ``chk-<id>`` directories went with it; what its
        ``shared/`` still holds from before the grace period is garbage (a job registered
        again under its id has a new session, and uploads only after that)."""
        job_id = session.job_id
        term = self._term
        before = self._clock() - round(self.grace_period_s * 1000)
        if not dry_run and not term.may_act():
            return JobOrphans(job_id, error="leadership lost; left for the next scan")
        try:
            if dry_run:
                removed = ended_job_shared_files(term.storage, job_id, ended_ms=before)
            else:
                removed = remove_ended_job_shared_files(term.storage, job_id, ended_ms=before)
        except STORAGE_FAILURES as exc:
            metrics.ORPHAN_SCAN_FAILURES.labels(job_id=job_id).inc()
            log.warning("shared files of ended job %s not deleted: %s", job_id, exc)
            return JobOrphans(job_id, error=f"{type(exc).__name__}: {exc}")
        if removed and not dry_run:
            log.info("deleted %d shared files of ended job %s", len(removed), job_id)
        listed = [{"path": f.path, "size_bytes": f.size} for f in removed]
        return JobOrphans(job_id, shared={"ended": True, "removed": listed})

    def _collect_job(self, session: JobSession, *, dry_run: bool) -> JobOrphans:
        job_id = session.job_id
        term = self._term
        # Before anything is read: a file is only ever judged older than it was then, so
        # an acknowledgement arriving after the states below were read is one of a
        # checkpoint triggered less than the grace period before (timeout <= grace).
        now = self._clock()
        try:
            # Order matters; see the module docstring.
            next_id = session.counter.get()
            pending = tuple(session.coordinator.pending_checkpoint_ids())
            held = session.coordinator.held_states()
            if session.coordinator.is_stopped:
                # Replaced by a re-registration: its successor's pending ids are unknown here.
                return JobOrphans(job_id, error="job session was replaced; scanned next time")
            retained = {p.checkpoint_id for p in session.store.get_all()}
            listed = term.listed_now(job_id)
            retained |= listed.ids
            if listed.undecodable:
                blocked = self._report_undecodable(job_id, listed)
                if blocked is not None:
                    return blocked
            else:
                metrics.ORPHAN_UNDECODABLE_POINTERS.labels(job_id=job_id).set(0)
            restored = session.coordinator.restored_checkpoint_id()
            if restored is not None:
                retained.add(restored)  # a new run may still be reading it
            found = term.storage.find_orphans(
                job_id,
                retained_ids=retained,
                next_checkpoint_id=min([next_id, *pending]),
                now_ms=now,
                keep_newest=True,
            )
            # Nothing above the newest completed checkpoint: see the module docstring.
            newest = max(retained, default=0)
            found = [o for o in found if o.checkpoint_id < newest]
            # A pointer that does not decode may reference any shared file: keep them all.
            shared = self._shared.collect_job(
                term.storage,
                job_id,
                [*session.store.get_all(), *listed.pointers],
                now_ms=now,
                grace_ms=self.grace_period_s * 1000,
                dry_run=dry_run or not term.may_act() or bool(listed.undecodable),
                held=held,
            )
        except (HAError, *STORAGE_FAILURES) as exc:
            metrics.ORPHAN_SCAN_FAILURES.labels(job_id=job_id).inc()
            log.warning("orphan scan of job %s failed: %s", job_id, exc)
            return JobOrphans(job_id, error=f"{type(exc).__name__}: {exc}")
        grace_ms = self.grace_period_s * 1000
        old = [o for o in found if now - o.modified_ms >= grace_ms]
        young = tuple(o for o in found if now - o.modified_ms < grace_ms)
        removed, error = (old, None) if dry_run else self._delete(job_id, old)
        left = found if dry_run else [o for o in found if o not in removed]
        if not self._stop.is_set():  # a term that ended reports nothing any more
            metrics.ORPHAN_DIRECTORIES.labels(job_id=job_id).set(len(left))
            metrics.ORPHAN_BYTES.labels(job_id=job_id).set(sum(o.size_bytes for o in left))
        return JobOrphans(
            job_id,
            retained=tuple(sorted(retained)),
            pending=pending,
            next_checkpoint_id=next_id,
            removed=tuple(removed),
            young=young,
            error=error,
            shared=shared.to_dict(),
        )
