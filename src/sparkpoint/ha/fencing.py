"""Fenced transactions and the fencing term (docs/architecture.md, section 3).

On winning the election a coordinator bumps ``leader/epoch`` and keeps the returned data
version E. Every write it makes afterwards is one multi-op transaction beginning with
``check(leader/epoch, E)``; once another coordinator has bumped the epoch, every such
transaction of the old leader fails as a whole and changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from sparkpoint import metrics
from sparkpoint.ha import translate
from sparkpoint.ha.connection import ConnectionState, ZooKeeperConnection
from sparkpoint.ha.errors import ConflictError, FencedError, HAError, PossiblyAppliedError
from sparkpoint.ha.leadership import Leadership

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a fenced transaction."""

    kind: str  # "create" | "set" | "delete" | "check"
    path: str
    value: bytes = b""
    version: int = -1
    ephemeral: bool = False

    @classmethod
    def create(cls, path: str, value: bytes, *, ephemeral: bool = False) -> Op:
        return cls("create", path, value, ephemeral=ephemeral)

    @classmethod
    def set(cls, path: str, value: bytes, version: int = -1) -> Op:
        return cls("set", path, value, version)

    @classmethod
    def delete(cls, path: str, version: int = -1) -> Op:
        return cls("delete", path, version=version)

    @classmethod
    def check(cls, path: str, version: int) -> Op:
        return cls("check", path, version=version)


@dataclass
class Fence:
    """The right to write as leader of epoch ``epoch`` (the data version of leader/epoch).

    ``on_fenced`` runs once, the first time a write finds the epoch moved on: the owner
    steps down there.
    """

    conn: ZooKeeperConnection
    epoch: int
    on_fenced: Callable[[FencedError], None] | None = None
    _fenced: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def is_fenced(self) -> bool:
        return self._fenced.is_set()

    def commit(self, ops: list[Op], what: str) -> list[Any]:
        """Run ``ops`` after ``check(leader/epoch, E)`` as one transaction.

        Raises FencedError if ZooKeeper refused it because the epoch moved on, ConflictError
        if it refused it because one of ``ops`` lost a compare-and-set, NotConnectedError if
        it was never sent — nothing was written in these three cases, and only in them.
        Anything else (no reply, connection lost mid-flight) raises PossiblyAppliedError:
        the write may or may not have been applied, and stays in doubt up to the caller.
        """
        if self.is_fenced:
            raise self._fenced_error(what, None)
        self.conn.require_connected()
        client = self.conn.client
        tx = client.transaction()
        tx.check(self.conn.paths.epoch, self.epoch)
        for op in ops:
            if op.kind == "create":
                tx.create(op.path, op.value, ephemeral=op.ephemeral)
            elif op.kind == "set":
                tx.set_data(op.path, op.value, version=op.version)
            elif op.kind == "delete":
                tx.delete(op.path, version=op.version)
            elif op.kind == "check":
                tx.check(op.path, op.version)
            else:
                raise ValueError(f"unknown transaction operation {op.kind!r}")
        try:
            with translate.writes(what):
                # Bounded wait: an unanswered transaction is in doubt, never waited on forever.
                results = tx.commit_async().get(timeout=self.conn.settings.session_timeout_s)
        except PossiblyAppliedError as exc:
            # A moved epoch does not make the write refused: it may have landed before the
            # successor's bump. It does mean we are deposed, so step down — but the error
            # stays the in-doubt one, so nobody discards what the write may have published.
            current = self._current_epoch(wait_reconnect=True)
            if current is not None and current != self.epoch:
                self._mark_fenced(self._fenced_error_of(what, current, in_doubt=True))
                raise PossiblyAppliedError(
                    f"{exc}; meanwhile the term moved from {self.epoch} to {current}: this "
                    "coordinator is deposed"
                ) from exc
            raise
        failures = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
        if not failures:
            return list(results[1:])
        epoch_result = results[0]
        if isinstance(epoch_result, BadVersionError | NoNodeError):
            raise self._fenced_error(what, self._current_epoch())
        causes = [
            (i, r)
            for i, r in failures
            if isinstance(r, BadVersionError | NodeExistsError | NoNodeError)
        ]
        if causes:
            index, cause = causes[0]
            op = ops[index - 1]
            raise ConflictError(f"{what}: {op.kind} {op.path} failed: {type(cause).__name__}")
        raise HAError(f"{what}: transaction failed: {failures}")

    def _current_epoch(self, *, wait_reconnect: bool = False) -> int | None:
        if wait_reconnect:
            self.conn.wait_for(ConnectionState.CONNECTED, self.conn.settings.session_timeout_s)
        try:
            with translate.reads("reading the leader term"):
                stat = self.conn.retry(self.conn.client.exists, self.conn.paths.epoch)
            return stat.version if stat else None
        except HAError:
            return None

    def _fenced_error(self, what: str, current: int | None) -> FencedError:
        """The error of a write ZooKeeper refused (or that was never sent once fenced)."""
        error = self._fenced_error_of(what, current, in_doubt=False)
        self._mark_fenced(error)
        return error

    def _fenced_error_of(self, what: str, current: int | None, *, in_doubt: bool) -> FencedError:
        outcome = "it may or may not have been applied" if in_doubt else "nothing was written"
        return FencedError(
            f"{what}: fenced — this coordinator led term {self.epoch}, the current term is "
            f"{current if current is not None else 'unknown'}; {outcome}",
            expected_epoch=self.epoch,
            current_epoch=current,
        )

    def _mark_fenced(self, error: FencedError) -> None:
        first = not self._fenced.is_set()
        self._fenced.set()
        metrics.FENCED_WRITES.inc()
        if first:
            log.warning("%s", error)
            if self.on_fenced is not None:
                self.on_fenced(error)


def read_epoch(conn: ZooKeeperConnection) -> int:
    """The current epoch (data version of leader/epoch), creating the node if missing."""
    path = conn.paths.epoch
    with translate.reads("reading the leader term"):
        conn.retry(conn.client.ensure_path, conn.paths.leader)
        with contextlib.suppress(NodeExistsError):
            conn.retry(conn.client.create, path, b"{}")
        _, stat = conn.retry(conn.client.get, path)
    return int(stat.version)


def bump_epoch(conn: ZooKeeperConnection, seen_epoch: int, payload: bytes) -> int:
    """Compare-and-set leader/epoch from ``seen_epoch``; return the new epoch E.

    Raises ConflictError if someone else bumped it first — at most one contender wins a
    given epoch, which is what lease-based takeover relies on.
    """
    with translate.writes("bumping the leader term"):
        stat = conn.client.set(conn.paths.epoch, payload, version=seen_epoch)
    return int(stat.version)


def bump_landed(conn: ZooKeeperConnection, seen_epoch: int, nonce: str) -> int | None:
    """After a bump from ``seen_epoch`` whose outcome is unknown: the new epoch if it was
    ours that landed (its payload carries ``nonce``), else None."""
    with translate.reads("re-reading the leader term"):
        raw, stat = conn.retry(conn.client.get, conn.paths.epoch)
    if stat.version != seen_epoch + 1 or nonce.encode() not in raw:
        return None
    return int(stat.version)


def current_term(conn: ZooKeeperConnection) -> int | None:
    """The epoch now (None if leader/epoch is gone), without creating anything."""
    with translate.reads("re-reading the leader term"):
        stat = conn.retry(conn.client.exists, conn.paths.epoch)
    return None if stat is None else int(stat.version)


def missing_parent_ops(conn: ZooKeeperConnection, path: str) -> list[Op]:
    """Create-ops for the absent ancestors of ``path``, outermost first, so they go in the
    same fenced transaction as the write that needs them."""
    ops: list[Op] = []
    parent = path.rsplit("/", 1)[0]
    with translate.reads(f"checking parents of {path}"):
        while parent and conn.retry(conn.client.exists, parent) is None:
            ops.insert(0, Op.create(parent, b""))
            parent = parent.rsplit("/", 1)[0]
    return ops


class ZooKeeperLeadership(Leadership):
    """A leadership won through ZooKeeper: carries the fence its writes go through."""

    def __init__(self, epoch: int, instance_id: str, fence: Fence) -> None:
        super().__init__(epoch, instance_id)
        self.fence = fence
