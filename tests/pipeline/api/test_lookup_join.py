"""The lookup join on real Spark (local mode): clicks keyed by user joined with a users
table — a Parquet path, or a function of the SparkSession — that changes between epochs.
Each epoch's records see the table as it was when the epoch started: what the sink
commits equals an offline join of each epoch's clicks with the table's version of that
epoch, across savepoints restored 4 → 3 → 6 on both state backends. The table travels to
the tasks as rows, never as a DataFrame, and bad lookup joins are refused."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.pipeline import (
    ClickEventSource,
    EmbeddedChannel,
    JoinContext,
    KeyedProcessFunction,
    LookupTable,
    Pipeline,
    PipelineDriver,
    ProcessJoinFunction,
    TransactionalFileSink,
    to_json_line,
)
from tests.pipeline import support

SPLITS, PER_EPOCH = 4, 80
PER_SPLIT = PER_EPOCH // SPLITS
USERS = [f"user-{n:05d}" for n in range(40)]
#: The users table at three times: epochs 1-2 read the first, epoch 3 the second, the
#: rest the third (user-00000 has two rows in the second: both are joined).
VERSIONS = [
    [{"user": u, "tier": f"gold-{n}"} for n, u in enumerate(USERS) if n % 2 == 0],
    [{"user": u, "tier": "silver"} for n, u in enumerate(USERS) if n % 3 == 0]
    + [{"user": USERS[0], "tier": "bronze"}],
    [{"user": u, "tier": "v3"} for u in USERS[:20]],
]


def version_of(epoch: int) -> int:
    return 0 if epoch <= 2 else 1 if epoch == 3 else 2


def clicks() -> ClickEventSource:
    """40 users over 4 splits, 5 epochs of 20 records per split."""
    return ClickEventSource(
        splits=SPLITS, users=40, records_per_epoch=PER_EPOCH, records_per_split=100
    )


class Tiered(ProcessJoinFunction):
    def process_element(self, click: Any, user: Any, ctx: JoinContext) -> None:
        ctx.collect({**click, "tier": user and user["tier"]})


def write_table(spark: Any, path: Path, version: int) -> None:
    spark.createDataFrame(VERSIONS[version]).write.mode("overwrite").parquet(str(path))


def pipeline(tmp_path: Path, parallelism: int, backend: str, table: LookupTable) -> Pipeline:
    return (
        Pipeline("lookup", parallelism=parallelism)
        .source(clicks())
        .key_by(lambda c: c["user"], key_type=str)
        .lookup_join(table)
        .left_outer()
        .process(Tiered(), uid="tiered")
        .sink(TransactionalFileSink(str(tmp_path / "out"), serialize=to_json_line))
        .with_state_backend(backend)
    )


def expected() -> list[str]:
    """Each click with every row of its user in its epoch's version of the table, or
    with None when there is none (left outer)."""
    lines = []
    for _, position, click in clicks().all_records():
        table = VERSIONS[version_of(position // PER_SPLIT + 1)]
        rows = [r for r in table if r["user"] == click["user"]] or [None]
        lines += [to_json_line({**click, "tier": r and r["tier"]}) for r in rows]
    return sorted(lines)


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_lookup_join_sees_the_table_as_of_each_epoch_4_3_6(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    path = tmp_path / "users.parquet"
    write_table(spark, path, 0)
    if backend == "memory":
        table = LookupTable(str(path), key="user", refresh_ms=1)
    else:
        table = LookupTable(lambda s: s.read.parquet(str(path)), key="user", refresh_ms=1)
    # Epochs 1-2 at parallelism 4 (table 0), then a savepoint.
    at4 = support.savepoint_after(spark, pipeline(tmp_path, 4, backend, table), tmp_path / "4", 1)
    write_table(spark, path, 1)
    # Epoch 3 at parallelism 3 (table 1), epoch 4 with the table changed again (2).
    channel = EmbeddedChannel(
        str(tmp_path / "3" / "ckpt"), savepoint_dir=str(tmp_path / "3" / "sp"),
        interval_ms=support.MANUAL,
    )  # fmt: skip
    p3 = pipeline(tmp_path, 3, backend, table)
    driver = PipelineDriver(p3, spark, channel, restore_from=at4)
    assert driver.start() is not None
    driver.run(max_epochs=1)
    write_table(spark, path, 2)
    at3 = driver.stop_with_savepoint()
    driver.close()
    # The rest at parallelism 6, as table 2 still.
    support.run_to_end(
        spark, pipeline(tmp_path, 6, backend, table), tmp_path / "6", restore_from=at3
    )
    got = sorted(TransactionalFileSink(str(tmp_path / "out")).committed_lines())
    assert got == expected()
    for tier in ('"tier":null', '"tier":"gold-0"', '"tier":"bronze"', '"tier":"v3"'):
        assert any(tier in line for line in got), tier


def test_a_lookup_table_travels_as_rows_read_again_when_due(spark: Any) -> None:
    frame = spark.createDataFrame([{"user": "a", "n": 1}, {"user": "a", "n": 2}])
    table = LookupTable(frame, key="user")
    shipped = pickle.loads(pickle.dumps(table))
    assert shipped.rows_of("a") == [{"n": 1, "user": "a"}, {"n": 2, "user": "a"}]
    assert shipped.rows_of("b") == []
    pickle.dumps(table)
    assert table.reads == 1  # no refresh_ms: read once, the rows shipped again
    by_pair = LookupTable(frame, key=["user", "n"], refresh_ms=1)
    assert pickle.loads(pickle.dumps(by_pair)).rows_of(("a", 2)) == [{"n": 2, "user": "a"}]
    with pytest.raises(ValueError, match=r"key column\(s\) \['id'\] not in the table's"):
        pickle.dumps(LookupTable(frame, key="id"))


def test_bad_lookup_joins_are_refused_with_what_is_wrong() -> None:
    p = Pipeline("bad-lookup", parallelism=2)
    users = LookupTable("/nowhere.parquet", key="user")
    keyed = p.source(clicks()).key_by(lambda c: c["user"])
    with pytest.raises(TypeError, match="LookupTable takes a DataFrame, a Parquet path or a"):
        LookupTable(42, key="user")
    with pytest.raises(TypeError, match="key must be a column name or names, got 3"):
        LookupTable("/t", key=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="refresh_ms must be a positive int, got 0"):
        LookupTable("/t", key="user", refresh_ms=0)
    with pytest.raises(TypeError, match=r"lookup_join takes a LookupTable\(table, key=…\)"):
        keyed.lookup_join("/t")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lookup_join needs a key_by before it"):
        p.source(clicks()).lookup_join(users)
    with pytest.raises(TypeError, match="a lookup join takes a ProcessJoinFunction, got Keyed"):
        keyed.lookup_join(users).process(KeyedProcessFunction())  # type: ignore[arg-type]
    a = p.source(clicks(), uid="a").key_by(lambda c: c["user"])
    b = p.source(clicks(), uid="b").key_by(lambda c: c["user"])
    with pytest.raises(ValueError, match="lookup_join on two connected streams"):
        a.connect(b).lookup_join(users)
