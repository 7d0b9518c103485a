"""CheckpointIDCounter in ZooKeeper: ``counters/<job-id>`` holds the next id.

The value is 8 bytes, big-endian. Every change is a compare-and-set on the znode version
inside a fenced transaction, so concurrent incrementers never hand out the same id and a
deposed leader hands out none. A write lost in doubt is never retried blindly: the loop
re-reads and compares-and-sets again, which may skip an id but never reuses one.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from sparkpoint.checkpoint import JobStatus, validate_checkpoint_id
from sparkpoint.counter.api import INITIAL_CHECKPOINT_ID
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

log = logging.getLogger(__name__)

_VALUE = struct.Struct(">q")


def encode_count(value: int) -> bytes:
    return _VALUE.pack(value)


def decode_count(raw: bytes, path: str) -> int:
    if len(raw) != _VALUE.size:
        raise HAError(f"counter {path} holds {len(raw)} bytes, expected {_VALUE.size}")
    return int(_VALUE.unpack(raw)[0])


class ZooKeeperCheckpointIDCounter:
    """The checkpoint id counter of one job, shared by every leader over time."""

    def __init__(
        self,
        conn: ZooKeeperConnection,
        job_id: str,
        fence: Fence,
        *,
        initial: int = INITIAL_CHECKPOINT_ID,
        max_attempts: int = 10_000,
    ) -> None:
        self._conn = conn
        self._fence = fence
        self._path = conn.paths.counter(job_id)
        self._initial = validate_checkpoint_id(initial)
        self._max_attempts = max_attempts
        self._known: tuple[int, int] | None = None  # (value, version) after our last write

    @property
    def path(self) -> str:
        return self._path

    def start(self) -> None:
        """Create the counter at ``initial`` unless it exists (a previous leader's value wins)."""
        for _ in range(self._max_attempts):
            if self._read() is not None:
                return
            parents = self._missing_parents()
            try:
                self._fence.commit(
                    [*parents, Op.create(self._path, encode_count(self._initial))],
                    f"creating counter {self._path}",
                )
                return
            except (ConflictError, PossiblyAppliedError):
                continue  # someone created it, or we did in doubt: re-read
        raise HAError(f"could not create counter {self._path}")

    def get(self) -> int:
        read = self._read()
        if read is None:
            raise HAError(f"counter {self._path} does not exist (start() it first)")
        return read[0]

    def get_and_increment(self) -> int:
        return self._compare_and_set(lambda current: current + 1, "incrementing")

    def set_count(self, new_count: int) -> None:
        """Move the counter up to ``new_count``; never down, so no id is handed out twice."""
        validate_checkpoint_id(new_count)
        self._compare_and_set(lambda current: max(current, new_count), "setting")

    def shutdown(self, job_status: JobStatus) -> None:
        if not job_status.is_globally_terminal:
            return  # the next leader continues from here
        try:
            self._fence.commit([Op.delete(self._path)], f"removing counter {self._path}")
        except ConflictError:
            log.info("counter %s already gone", self._path)

    # --- internals ----------------------------------------------------------------------

    def _read(self) -> tuple[int, int] | None:
        with translate.reads(f"reading counter {self._path}"):
            try:
                raw, stat = self._conn.retry(self._conn.client.get, self._path)
            except NoNodeError:
                return None
        return decode_count(raw, self._path), stat.version

    def _compare_and_set(self, update: Callable[[int], int], what: str) -> int:
        for _ in range(self._max_attempts):
            # The value and version our last write produced save a read round trip; if
            # someone else wrote since, the compare-and-set fails and we read afresh.
            read, self._known = self._known or self._read(), None
            if read is None:
                raise HAError(f"counter {self._path} does not exist (start() it first)")
            current, version = read
            new = update(current)
            if new == current:
                return current
            try:
                (stat,) = self._fence.commit(
                    [Op.set(self._path, encode_count(new), version=version)],
                    f"{what} counter {self._path}",
                )
            except ConflictError:
                continue  # another writer got there first
            except PossiblyAppliedError:
                # Maybe ours went through: treat `current` as possibly issued and move on.
                log.warning("counter %s: in-doubt write, re-reading", self._path)
                continue
            self._known = (new, stat.version)
            return current
        raise HAError(f"counter {self._path}: gave up after {self._max_attempts} conflicts")

    def _missing_parents(self) -> list[Op]:
        return missing_parent_ops(self._conn, self._path)
