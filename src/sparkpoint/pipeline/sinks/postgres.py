"""A PostgreSQL sink on the two-phase-commit base, with psycopg 3.

Each subtask's outputs of a checkpoint interval are kept by the driver, then written in
ONE database transaction at the snapshot (``COPY`` into the table) and prepared with
``PREPARE TRANSACTION 'sp:<job>:<operator>:<subtask>:<checkpoint>'``. When the
checkpoint completes, ``COMMIT PREPARED``. Holding the rows until the snapshot (rather
than an open transaction across epochs) means a database restart between epochs loses
nothing; the transaction is open only for the few moments of the pre-commit.

Idempotence: a pre-commit whose reply was lost finds its gid already prepared and stops
there; a commit whose gid is no longer prepared was committed before. Connection
failures are retried until ``retry_s`` runs out, so a database restart during a commit
only delays it. The server needs ``max_prepared_transactions`` > 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from sparkpoint.pipeline.sinks.base import TwoPhaseCommitSink

log = logging.getLogger(__name__)
R = TypeVar("R")

#: Every gid this sink makes starts with this, then ``<job>:<operator>:``.
GID_PREFIX = "sp"


@dataclass
class OpenTransaction:
    subtask: int
    rows: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    gid: str
    rows: int


class PostgresSink(TwoPhaseCommitSink[OpenTransaction, PreparedTransaction]):
    """``conninfo``: a libpq connection string. Each output becomes one row of ``table``
    via ``to_row(value)`` → a tuple in ``columns`` order. ``create_table``: a
    ``CREATE TABLE IF NOT EXISTS`` statement run once at bind time (optional)."""

    def __init__(
        self,
        conninfo: str,
        table: str,
        columns: Sequence[str],
        to_row: Callable[[Any], tuple[Any, ...]],
        *,
        create_table: str | None = None,
        retry_s: float = 120.0,
    ) -> None:
        super().__init__()
        if not columns:
            raise ValueError("a PostgreSQL sink needs at least one column")
        self.conninfo = conninfo
        self.table = table
        self.columns = tuple(columns)
        self.to_row = to_row
        self.create_table = create_table
        self.retry_s = retry_s
        self.committed_rows = 0

    def bind(self, job_id: str, operator_uid: str) -> None:
        super().bind(job_id, operator_uid)
        if self.create_table:
            statement = self.create_table
            self._retrying("create table", lambda: self._autocommit(statement))

    def gid(self, subtask: int, checkpoint_id: int) -> str:
        return f"{self._gid_prefix()}{subtask}:{checkpoint_id}"

    def _gid_prefix(self) -> str:
        return f"{GID_PREFIX}:{self.job_id}:{self.operator_uid}:"

    # -- transactions ------------------------------------------------------------------

    def begin_transaction(self, subtask: int) -> OpenTransaction:
        return OpenTransaction(subtask)

    def invoke(self, transaction: OpenTransaction, value: Any) -> None:
        transaction.rows.append(tuple(self.to_row(value)))

    def pre_commit_transaction(
        self, transaction: OpenTransaction, checkpoint_id: int
    ) -> PreparedTransaction:
        gid = self.gid(transaction.subtask, checkpoint_id)
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(*self.table.split(".")),
            sql.SQL(", ").join(sql.Identifier(c) for c in self.columns),
        )

        def prepare() -> None:
            with psycopg.connect(self.conninfo) as conn:
                if gid in self._prepared_gids(conn, gid):
                    return  # prepared by an attempt whose reply was lost
                with conn.cursor() as cur, cur.copy(copy) as out:
                    for row in transaction.rows:
                        out.write_row(row)
                conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))

        self._retrying(f"prepare {gid}", prepare)
        return PreparedTransaction(gid, len(transaction.rows))

    def commit(self, prepared: PreparedTransaction) -> None:
        def commit() -> None:
            try:
                self._autocommit(sql.SQL("COMMIT PREPARED {}").format(sql.Literal(prepared.gid)))
                self.committed_rows += prepared.rows
            except psycopg.errors.UndefinedObject:
                log.info("transaction %s was committed before", prepared.gid)

        self._retrying(f"commit {prepared.gid}", commit)

    def abort_others(self, keep: list[PreparedTransaction]) -> int:
        kept = {p.gid for p in keep}

        def abort() -> int:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                dangling = [
                    g for g in self._prepared_gids(conn, self._gid_prefix()) if g not in kept
                ]
                for gid in dangling:
                    conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
            return len(dangling)

        aborted = self._retrying("abort dangling transactions", abort)
        if aborted:
            log.info("rolled back %d dangling prepared transactions", aborted)
        return aborted

    # -- helpers -----------------------------------------------------------------------

    def _prepared_gids(self, conn: psycopg.Connection[Any], prefix: str) -> list[str]:
        """Prepared gids of this database that start with ``prefix``."""
        rows = conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
            " AND starts_with(gid, %s)",
            (prefix,),
        ).fetchall()
        return [r[0] for r in rows]

    def _autocommit(self, statement: sql.Composable | str) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def _retrying(self, what: str, action: Callable[[], R]) -> R:
        """Retry on a lost or refused connection (a restarting server) until ``retry_s``."""
        deadline = time.monotonic() + self.retry_s
        wait = 0.1
        while True:
            try:
                return action()
            except psycopg.OperationalError as exc:
                if time.monotonic() + wait > deadline:
                    raise
                log.warning("PostgreSQL unavailable during %s (%s); retrying", what, exc)
                time.sleep(wait)  # backoff between reconnects to a restarting server
                wait = min(2.0, wait * 2)
