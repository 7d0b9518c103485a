"""CompletedCheckpointStore in ZooKeeper: one pointer znode per retained checkpoint.

``checkpoints/<job-id>/<19-digit id>`` holds a :class:`CheckpointPointer` (where the
``_metadata`` is, plus a summary) — never the state itself. Adding a checkpoint and
removing the pointers it subsumes is one fenced transaction, so the store is never seen
with too few checkpoints, and a deposed leader cannot change it at all.
"""

from __future__ import annotations

import logging
import time

from kazoo.exceptions import NoNodeError

from sparkpoint import metrics
from sparkpoint.checkpoint import (
    CheckpointPointer,
    InvalidCheckpointValue,
    JobStatus,
    parse_checkpoint_id,
)
from sparkpoint.ha import (
    ConflictError,
    Fence,
    HAError,
    Op,
    PossiblyAppliedError,
    ZooKeeperConnection,
    translate,
)
from sparkpoint.ha.fencing import missing_parent_ops
from sparkpoint.store.api import (
    DEFAULT_MAX_RETAINED,
    CheckpointDiscarder,
    CheckpointStoreError,
)
from sparkpoint.store.retention import check_can_add, subsumed_by_adding, validate_max_retained

log = logging.getLogger(__name__)

#: Listings read again, at most, when a listed pointer went before it was read.
LISTING_ATTEMPTS = 5


class ZooKeeperCompletedCheckpointStore:
    """The retained checkpoints of one job. ``fence`` is None for read-only use (the CLI
    reading while no coordinator runs); every write then raises."""

    def __init__(
        self,
        conn: ZooKeeperConnection,
        job_id: str,
        fence: Fence | None,
        *,
        max_retained: int = DEFAULT_MAX_RETAINED,
    ) -> None:
        self._conn = conn
        self._job_id = job_id
        self._fence = fence
        self._max_retained = validate_max_retained(max_retained)
        self._dir = conn.paths.job_checkpoints(job_id)
        self._retained: list[CheckpointPointer] = []
        self._parents_exist = False  # saves a round trip per add once the job's node exists
        self._stale = False  # an add ended in doubt: re-read before trusting _retained
        #: Pointers skipped by the last recover() because they could not be read.
        self.unreadable: list[str] = []
        #: The same, by the checkpoint id each one's znode name gives (None: the name
        #: gives none). What the store lists is protected whether it decodes or not.
        self.unreadable_ids: dict[str, int | None] = {}

    @property
    def max_retained(self) -> int:
        return self._max_retained

    # --- reading ------------------------------------------------------------------------

    def recover(self) -> list[CheckpointPointer]:
        """Read every pointer, oldest first; skip (with a warning and a metric) what cannot
        be decoded instead of failing, so one bad znode never blocks a job's recovery."""
        started = time.monotonic()
        pointers: list[CheckpointPointer] = []
        unreadable: dict[str, int | None] = {}
        with translate.reads(f"reading checkpoints of job {self._job_id}"):
            listed = self._read_listing({})
        for name, raw in listed:
            assert isinstance(raw, bytes)
            try:
                pointers.append(self._decode(name, raw))
            except InvalidCheckpointValue as exc:
                path = f"{self._dir}/{name}"
                log.warning("skipping unreadable checkpoint pointer %s: %s", path, exc)
                metrics.STORE_UNREADABLE_POINTERS.labels(job_id=self._job_id).inc()
                unreadable[path] = _id_in_name(name)
        pointers.sort(key=lambda p: p.checkpoint_id)
        self._retained = pointers
        self._stale = False
        self.unreadable = list(unreadable)
        self.unreadable_ids = unreadable
        metrics.STORE_RECOVERY_DURATION.observe(time.monotonic() - started)
        return list(pointers)

    def read_incrementally(self, known: dict[int, CheckpointPointer]) -> list[CheckpointPointer]:
        """Every retained pointer, oldest first, reading only those not in ``known`` (a
        pointer never changes once written: ids are never reused). For readers that poll,
        like the web UI on a follower; unreadable pointers are left out."""
        with translate.reads(f"reading checkpoints of job {self._job_id}"):
            listed = self._read_listing(known)
        pointers: list[CheckpointPointer] = []
        for name, item in listed:
            if isinstance(item, CheckpointPointer):
                pointers.append(item)
                continue
            try:
                pointers.append(self._decode(name, item))
            except InvalidCheckpointValue:
                continue  # recover() reports those
        return sorted(pointers, key=lambda p: p.checkpoint_id)

    def _read_listing(
        self, known: dict[int, CheckpointPointer]
    ) -> list[tuple[str, bytes | CheckpointPointer]]:
        """``(znode name, its bytes, or the pointer already known)`` of each pointer of
        one listing, all of which were still there when read. A pointer goes only when a
        newer checkpoint subsumes it, and the newer one's pointer is created in the same
        transaction: a listing taken before that transaction and read after it shows
        neither (no checkpoint at all, with one retained). A vanished pointer therefore
        means: list again."""
        read: list[tuple[str, bytes | CheckpointPointer]] = []
        for _ in range(LISTING_ATTEMPTS):
            try:
                names = self._conn.retry(self._conn.client.get_children, self._dir)
            except NoNodeError:
                return []
            read = []
            for name in sorted(names):
                checkpoint_id = _id_in_name(name)
                if checkpoint_id is not None and checkpoint_id in known:
                    read.append((name, known[checkpoint_id]))
                    continue
                try:
                    raw, _ = self._conn.retry(self._conn.client.get, f"{self._dir}/{name}")
                except NoNodeError:
                    log.info("checkpoint pointer %s/%s went while read: listing again",
                             self._dir, name)  # fmt: skip
                    break
                read.append((name, raw))
            else:
                return read
        return read  # pointers still going after several listings: what the last one read

    def _decode(self, name: str, raw: bytes) -> CheckpointPointer:
        checkpoint_id = parse_checkpoint_id(name)
        pointer = CheckpointPointer.from_bytes(raw)
        if pointer.checkpoint_id != checkpoint_id or pointer.job_id != self._job_id:
            raise InvalidCheckpointValue(
                f"pointer names job {pointer.job_id} checkpoint {pointer.checkpoint_id}, "
                f"but sits at job {self._job_id} checkpoint {checkpoint_id}"
            )
        return pointer

    def get_latest(self) -> CheckpointPointer | None:
        retained = self.get_all()
        return retained[-1] if retained else None

    def get_all(self) -> list[CheckpointPointer]:
        """The retained pointers; after an add whose outcome was in doubt, read again from
        ZooKeeper first (a restore plan must not name a checkpoint the in-doubt write may
        have subsumed). A failing re-read raises: nothing is answered from a stale view."""
        if self._stale:
            self.recover()
        return list(self._retained)

    # --- writing ------------------------------------------------------------------------

    def add_checkpoint_and_subsume_oldest(
        self, pointer: CheckpointPointer, discarder: CheckpointDiscarder | None = None
    ) -> list[CheckpointPointer]:
        if pointer.job_id != self._job_id:
            raise CheckpointStoreError(
                f"checkpoint of job {pointer.job_id} offered to the store of job {self._job_id}"
            )
        fence = self._require_fence()
        if self._stale:
            self.recover()
        check_can_add(self._retained, pointer)
        subsumed = subsumed_by_adding(self._retained, self._max_retained)
        path = self._conn.paths.checkpoint(self._job_id, pointer.checkpoint_id)
        parents = [] if self._parents_exist else missing_parent_ops(self._conn, path)
        ops = [
            *parents,
            Op.create(path, pointer.to_bytes()),
            *(
                Op.delete(self._conn.paths.checkpoint(self._job_id, s.checkpoint_id))
                for s in subsumed
            ),
        ]
        what = f"adding checkpoint {pointer.checkpoint_id} of job {self._job_id}"
        try:
            fence.commit(ops, what)
        except ConflictError as exc:
            # ZooKeeper disagrees with our view (someone else wrote): re-read, then refuse.
            self._parents_exist = False
            self.recover()
            # If a pointer with this id is there after all, the files are its files.
            check_can_add(self._retained, pointer)
            raise CheckpointStoreError(
                f"{exc}; the store was re-read, nothing was changed"
            ) from exc
        except PossiblyAppliedError as exc:
            # Our view of the store is stale whatever the outcome: re-read before the next add.
            self._parents_exist = False
            self._stale = True
            if not self._applied(path, pointer, exc):
                raise
            log.warning("%s: in-doubt write turned out applied", what)
        self._parents_exist = True
        self._retained = [*self._retained[len(subsumed) :], pointer]
        self._discard(subsumed, discarder)
        return subsumed

    def _applied(self, path: str, pointer: CheckpointPointer, cause: PossiblyAppliedError) -> bool:
        """After an in-doubt add: did our exact pointer land? False means "not seen" (the
        caller re-raises the in-doubt error); a re-read that fails leaves it in doubt too."""
        try:
            with translate.reads(f"re-reading {path}"):
                try:
                    raw, _ = self._conn.retry(self._conn.client.get, path)
                except NoNodeError:
                    return False
        except HAError as exc:
            raise PossiblyAppliedError(
                f"{cause}; re-reading {path} failed too ({exc}): still in doubt"
            ) from exc
        if raw != pointer.to_bytes():
            return False
        self._stale = False
        return True

    def shutdown(self, job_status: JobStatus, discarder: CheckpointDiscarder | None = None) -> None:
        """On a globally terminal status remove every pointer (and discard the files);
        otherwise keep everything for the next leader."""
        if not job_status.is_globally_terminal:
            return
        fence = self._require_fence()
        dropped = self.recover()
        ops = [
            Op.delete(self._conn.paths.checkpoint(self._job_id, p.checkpoint_id)) for p in dropped
        ]
        ops += [Op.delete(path) for path in self.unreadable]
        with translate.reads(f"checking {self._dir}"):
            exists = self._conn.retry(self._conn.client.exists, self._dir) is not None
        if exists:
            ops.append(Op.delete(self._dir))
        if ops:
            fence.commit(ops, f"removing the checkpoints of job {self._job_id}")
        self._retained = []
        self._parents_exist = False
        self._discard(dropped, discarder)

    def _require_fence(self) -> Fence:
        if self._fence is None:
            raise HAError(f"the store of job {self._job_id} was opened read-only")
        return self._fence

    @staticmethod
    def _discard(pointers: list[CheckpointPointer], discarder: CheckpointDiscarder | None) -> None:
        if discarder is None:
            return
        for pointer in pointers:
            if pointer.is_savepoint:
                continue  # savepoints belong to the user
            try:
                discarder.discard(pointer)
            except Exception as exc:  # the orphan collector removes what is left behind
                log.warning("could not discard checkpoint %s: %s", pointer.checkpoint_id, exc)


def _id_in_name(name: str) -> int | None:
    try:
        return parse_checkpoint_id(name)
    except InvalidCheckpointValue:
        return None
