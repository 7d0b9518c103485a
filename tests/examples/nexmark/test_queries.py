"""Every Nexmark query of the example, run on real Spark over generated events, commits
exactly its oracle's result (DuckDB SQL over the same files); and the comparison itself
fails on wrong output.

Small on purpose (3 000 events in 3 files, a few epochs each): the events start 150 ms
before midnight, so the per-day queries see two days.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkpoint.examples.nexmark import highest_bid, hot_items, oracle, sessions
from sparkpoint.examples.nexmark.__main__ import main
from sparkpoint.examples.nexmark.events import EventFiles, bid_stream
from sparkpoint.examples.nexmark.queries import QUERIES
from sparkpoint.examples.nexmark.run import run_query
from sparkpoint.ops.devcluster.nexmark import BASE_TIME_MS, write_events
from sparkpoint.pipeline import EmbeddedChannel, Pipeline, PipelineDriver, TransactionalFileSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS, SPLITS = 3_000, 3
#: About half of each file per epoch: two epochs at least, so state and watermarks carry over.
BYTES_PER_EPOCH = 150_000


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("nexmark") / "events"
    return str(write_events(directory, EVENTS, splits=SPLITS, base_time_ms=BASE_TIME_MS - 150))


@pytest.mark.parametrize("name", list(QUERIES))
def test_a_query_commits_its_oracle_result(
    name: str, events_dir: str, spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run = run_query(
        name, events_dir, str(out), spark, str(tmp_path / "ckpt"),
        parallelism=2, bytes_per_epoch=BYTES_PER_EPOCH,
    )  # fmt: skip
    assert run.epochs >= 2
    expected = oracle.expected_rows(name, events_dir)
    assert expected  # every query has rows on these events
    assert oracle.differences(expected, oracle.committed_rows(name, out)) == []


def run_to_end(query: Pipeline, spark: SparkSession, work: Path) -> int:
    """Run ``query``'s rows into ``work/out`` to the end of the events: its epochs."""
    pipeline = query.sink(TransactionalFileSink(str(work / "out")))
    driver = PipelineDriver(pipeline, spark, EmbeddedChannel(str(work / "ckpt")))
    try:
        driver.start()
        driver.run()
        driver.finish()
    finally:
        driver.close()
    return driver.status.epoch


SHORT_WINDOWS = {
    "q5": (partial(hot_items.q5, size_ms=100, slide_ms=20), oracle.hot_items_sql(100, 20)),
    "q7": (partial(highest_bid.q7, size_ms=10), oracle.highest_bid_sql(10)),
    "q11": (partial(sessions.q11, gap_ms=20), oracle.session_sql(20)),
}


@pytest.mark.parametrize("name", list(SHORT_WINDOWS))
def test_short_windows_give_many_results_per_key(
    name: str, events_dir: str, spark: SparkSession, tmp_path: Path
) -> None:
    """At the suite's sizes the 300 ms of events fall in a few windows; at 20 ms a key
    has many, which the windows must open, merge and close as the oracle does."""
    build, sql = SHORT_WINDOWS[name]
    bids = bid_stream(
        f"nexmark-{name}-short", events_dir, parallelism=2, bytes_per_epoch=BYTES_PER_EPOCH
    )
    run_to_end(build(bids), spark, tmp_path)
    expected = oracle.rows_of(sql, events_dir)
    assert len(expected) > 2 * len(oracle.expected_rows(name, events_dir))
    assert oracle.differences(expected, oracle.committed_rows(name, tmp_path / "out")) == []


@pytest.mark.parametrize("name", ["q11", "q4"])
def test_a_stateful_query_keeps_its_state_in_rocksdb(
    name: str, events_dir: str, spark: SparkSession, tmp_path: Path
) -> None:
    """A windowed query, and a join followed by a second keyed stage."""
    out = tmp_path / "out"
    run_query(
        name, events_dir, str(out), spark, str(tmp_path / "ckpt"),
        parallelism=2, bytes_per_epoch=BYTES_PER_EPOCH, state_backend="rocksdb",
    )  # fmt: skip
    assert oracle.check(name, events_dir, out) == []


@dataclass(frozen=True)
class FirstInputBehind(EventFiles):
    """The persons and the auctions read a quarter as fast as the bids: the records of
    the second input of a join (auctions, bids) mostly come epochs before the row they
    join (their seller, their auction)."""

    def stream(self, kind: str, *, uid: str | None = None) -> Pipeline:
        pace = self.bytes_per_epoch // 4 if kind in ("persons", "auctions") else None
        files = EventFiles(self.job_id, self.directory, self.parallelism,
                           pace or self.bytes_per_epoch)  # fmt: skip
        return files.stream(kind, uid=uid)


@pytest.mark.parametrize("name", ["q9", "q20"])
def test_a_join_does_not_depend_on_which_input_runs_ahead(
    name: str, events_dir: str, spark: SparkSession, tmp_path: Path
) -> None:
    """The records that come before what they join wait for it in the key's state (and
    q9's bids until the watermark passes them)."""
    files = FirstInputBehind(f"nexmark-{name}-behind", events_dir, 2, BYTES_PER_EPOCH)
    assert run_to_end(QUERIES[name].build(files), spark, tmp_path) >= 6
    assert oracle.check(name, events_dir, tmp_path / "out") == []


def test_the_events_cross_midnight(events_dir: str) -> None:
    days = oracle.expected_rows("q15", events_dir)
    assert [d["day"] for d in sorted(days, key=lambda d: d["day"])] == ["2025-12-31", "2026-01-01"]


def test_the_comparison_fails_on_a_wrong_output(events_dir: str, tmp_path: Path) -> None:
    expected = oracle.expected_rows("q19", events_dir)
    assert oracle.differences(expected, list(reversed(expected))) == []  # order is free
    wrong_price = [{**expected[0], "price": expected[0]["price"] + 1}, *expected[1:]]
    missing, unexpected = oracle.differences(expected, wrong_price)
    assert missing.startswith("1 rows missing") and unexpected.startswith("1 rows not expected")
    assert oracle.differences(expected, expected[1:]) == [
        f"1 rows missing, e.g. {[oracle.to_json_line(expected[0])]}"
    ]
    assert oracle.differences(expected, [*expected, expected[0]])[0].startswith(
        "1 rows not expected"
    )
    # Upserts: only each key's last version counts, so a stale last version fails.
    out = tmp_path / "out"
    out.mkdir()
    stale = [{**r, "version": 2} for r in expected] + [{**wrong_price[0], "version": 3}]
    (out / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stale))
    assert len(oracle.check("q19", events_dir, out)) == 2
    (out / "part-1.jsonl").write_text(json.dumps({**expected[0], "version": 4}) + "\n")
    assert oracle.check("q19", events_dir, out) == []


def test_the_command_names_what_is_left_out_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["q12"])
    assert "q12 is left out: processing-time windows" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["q99"])
    assert "the queries are q0, q1, q2" in capsys.readouterr().err
