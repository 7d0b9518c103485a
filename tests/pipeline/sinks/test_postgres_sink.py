"""The PostgreSQL two-phase-commit sink against a real server, without Spark: restore
commits what the checkpoint pre-committed and rolls back the rest; a commit survives a
server restart in the middle of it and is idempotent."""

from __future__ import annotations

import threading
import uuid

import psycopg

from sparkpoint.ops.devcluster.system_servers import PostgresServer
from sparkpoint.pipeline.sinks.base import EpochOutput
from sparkpoint.pipeline.sinks.postgres import PostgresSink
from tests.examples import support

TABLE = "sink_rows"


def make_sink(postgres: PostgresServer, job_id: str, *, retry_s: float = 120.0) -> PostgresSink:
    sink = PostgresSink(
        postgres.conninfo,
        TABLE,
        ("job", "value"),
        lambda v: (job_id, v),
        create_table=f"CREATE TABLE IF NOT EXISTS {TABLE} (job text, value bigint)",
        retry_s=retry_s,
    )
    sink.bind(job_id, "sink")
    return sink


def values(postgres: PostgresServer, job_id: str) -> list[int]:
    with psycopg.connect(postgres.conninfo) as conn:
        rows = conn.execute(f"SELECT value FROM {TABLE} WHERE job = %s", (job_id,)).fetchall()
    return sorted(r[0] for r in rows)


def test_restore_commits_the_checkpoints_transactions_and_rolls_back_the_rest(
    postgres: PostgresServer,
) -> None:
    job_id = f"j{uuid.uuid4().hex[:8]}"
    sink = make_sink(postgres, job_id)
    sink.epoch_written([EpochOutput(0, (1, 2)), EpochOutput(1, (3,))])
    sink.pre_commit(5)
    state = [e for part in sink.snapshot(3) for e in part]
    sink.epoch_written([EpochOutput(0, (4,))])
    sink.pre_commit(6)  # never completes: its epoch runs again after the restore
    assert sorted(support.prepared_gids(postgres, job_id)) == [
        f"sp:{job_id}:sink:0:5",
        f"sp:{job_id}:sink:0:6",
        f"sp:{job_id}:sink:1:5",
    ]
    assert values(postgres, job_id) == []  # prepared, not visible
    restarted = make_sink(postgres, job_id)
    restarted.restore(state)
    assert values(postgres, job_id) == [1, 2, 3]
    assert support.prepared_gids(postgres, job_id) == []
    restarted.restore(state)  # a second restore from the same checkpoint changes nothing
    assert values(postgres, job_id) == [1, 2, 3]


def test_a_fresh_start_rolls_back_every_dangling_transaction(postgres: PostgresServer) -> None:
    job_id = f"j{uuid.uuid4().hex[:8]}"
    sink = make_sink(postgres, job_id)
    sink.epoch_written([EpochOutput(2, (7,))])
    sink.pre_commit(1)
    make_sink(postgres, job_id).restore([])
    assert support.prepared_gids(postgres, job_id) == []
    assert values(postgres, job_id) == []


def test_a_superseded_runs_late_prepare_ends_with_the_current_runs_next_checkpoint(
    postgres: PostgresServer,
) -> None:
    # The superseded run's snapshot of checkpoint 7 raced its supersession: it prepared
    # after the new run's restore had rolled back what it knew of, then got 409.
    job_id = f"j{uuid.uuid4().hex[:8]}"
    current = make_sink(postgres, job_id)
    current.restore([])
    superseded = make_sink(postgres, job_id)
    superseded.epoch_written([EpochOutput(0, (70,))])
    superseded.pre_commit(7)
    assert support.prepared_gids(postgres, job_id) == [f"sp:{job_id}:sink:0:7"]

    current.epoch_written([EpochOutput(0, (8,))])
    current.pre_commit(8)
    current.epoch_written([EpochOutput(1, (9,))])
    current.pre_commit(9)  # in flight when 8 completes: kept
    current.commit_up_to(8)
    assert support.prepared_gids(postgres, job_id) == [f"sp:{job_id}:sink:1:9"]
    current.commit_up_to(9)
    assert support.prepared_gids(postgres, job_id) == []
    assert values(postgres, job_id) == [8, 9]  # the superseded run's 70 never shows


def test_commit_rides_out_a_postgres_restart(postgres: PostgresServer) -> None:
    job_id = f"j{uuid.uuid4().hex[:8]}"
    sink = make_sink(postgres, job_id)
    sink.epoch_written([EpochOutput(0, (10, 11)), EpochOutput(1, (12,))])
    sink.pre_commit(3)
    state = [e for part in sink.snapshot(2) for e in part]
    postgres.stop("immediate")  # a crash: prepared transactions survive it (WAL)
    result: list[object] = []
    committer = threading.Thread(target=lambda: result.append(sink.commit_up_to(3)))
    committer.start()
    try:
        postgres.start()
    finally:
        committer.join(timeout=180)
    assert result == [2]
    assert values(postgres, job_id) == [10, 11, 12]
    # A restarted driver commits checkpoint 3's transactions again: a no-op.
    make_sink(postgres, job_id).restore(state)
    assert support.prepared_gids(postgres, job_id) == []
    assert values(postgres, job_id) == [10, 11, 12]
