"""Fan-out on real Spark (local mode): one keyed stage's outputs used by two branches
and the source's records by a third, each with its own stages, keyed stage (its own uid
and state) and sink, in one job. What
the three sinks commit equals an offline computation, across savepoints restored 4 → 3
→ 6 on both state backends; each branch's state is its own in the savepoints. Bad
branches are refused with errors that name what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.pipeline import (
    ClickEventSource,
    Context,
    KeyedProcessFunction,
    MapStateDescriptor,
    Pipeline,
    RuntimeContext,
    TransactionalFileSink,
    ValueStateDescriptor,
    WatermarkStrategy,
    read_keyed_state,
)
from tests.pipeline import support

BIG = 5_000


def clicks() -> ClickEventSource:
    """40 users over 4 splits, 3 epochs of 40 records per split."""
    return ClickEventSource(splits=4, users=40, records_per_epoch=160, records_per_split=120)


class Numbered(KeyedProcessFunction):
    """Each click of a user with its number among the user's clicks."""

    def open(self, ctx: RuntimeContext) -> None:
        self.count = ctx.get_state(ValueStateDescriptor("clicks", 0))

    def process_element(self, key: Any, click: Any, ctx: Context) -> None:
        self.count.update(self.count.value() + 1)
        ctx.collect({**click, "n": self.count.value()})


class PerUserOfPage(KeyedProcessFunction):
    """Keyed by page: how many clicks of this user the page has had so far."""

    def open(self, ctx: RuntimeContext) -> None:
        self.users = ctx.get_map_state(MapStateDescriptor("users"))

    def process_element(self, key: Any, click: Any, ctx: Context) -> None:
        seen = (self.users.get(click["user"]) or 0) + 1
        self.users.put(click["user"], seen)
        ctx.collect(f"{key},{click['user']},{seen}")


def pipeline(tmp_path: Path, parallelism: int, backend: str) -> Pipeline:
    stream = Pipeline("fan-out", parallelism=parallelism).with_state_backend(backend)
    stream = stream.source(clicks())
    numbered = stream.key_by(lambda c: c["user"]).process(Numbered(), uid="numbered")
    main = numbered.map(lambda c: f"{c['user']},{c['n']}").sink(sink(tmp_path, "main"))
    pages = (
        numbered.key_by(lambda c: c["page"])
        .process(PerUserOfPage(), uid="pages")
        .sink(sink(tmp_path, "pages"), uid="pages-sink")
    )
    big = (
        numbered.filter(lambda c: c["amount"] >= BIG)
        .key_by(lambda c: c["user"])
        .process(Numbered(), uid="big")
        .map(lambda c: f"{c['user']},{c['n']},{c['amount']}")
        .sink(sink(tmp_path, "big"), uid="big-sink")
    )
    # A branch of the source's records themselves: the same lines as pages'.
    source_pages = (
        stream.key_by(lambda c: c["page"])
        .process(PerUserOfPage(), uid="source-pages")
        .sink(sink(tmp_path, "source-pages"), uid="source-pages-sink")
    )
    return main.with_branches(pages, big, source_pages)


def sink(tmp_path: Path, name: str) -> TransactionalFileSink:
    return TransactionalFileSink(str(tmp_path / name), serialize=str)


def committed(tmp_path: Path, name: str) -> list[str]:
    return sorted(sink(tmp_path, name).committed_lines())


def expected() -> dict[str, list[str]]:
    counts: dict[Any, int] = {}
    out: dict[str, list[str]] = {"main": [], "pages": [], "big": []}
    for _, _, c in clicks().all_records():  # each user's clicks in order (one split)
        for name, key, keep in (
            ("main", c["user"], True),
            ("pages", (c["page"], c["user"]), True),
            ("big", ("big", c["user"]), c["amount"] >= BIG),
        ):
            if not keep:
                continue
            counts[key] = counts.get(key, 0) + 1
            n = counts[key]
            out[name].append(
                f"{c['user']},{n}"
                if name == "main"
                else f"{c['page']},{c['user']},{n}"
                if name == "pages"
                else f"{c['user']},{n},{c['amount']}"
            )
    return {name: sorted(lines) for name, lines in out.items()}


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_branches_rescaled_4_3_6_equal_the_offline_outputs(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    p4 = pipeline(tmp_path, 4, backend)
    uids = [op.uid for op in p4.job_graph().operators]
    assert uids == ["source", "numbered", "pages", "big", "source-pages", "sink"]
    at4 = support.savepoint_after(spark, p4, tmp_path / "4", 0)
    at3 = support.savepoint_after(
        spark, pipeline(tmp_path, 3, backend), tmp_path / "3", 0, restore_from=at4
    )
    support.run_to_end(spark, pipeline(tmp_path, 6, backend), tmp_path / "6", restore_from=at3)
    want = expected()
    want["source-pages"] = want["pages"]
    for name in ("main", "pages", "big", "source-pages"):
        got = committed(tmp_path, name)
        assert len(got) > 50 and got == want[name], name
    # Each branch's keyed state is its own, under its uid.
    assert {r.state for r in read_keyed_state(spark, at3, "pages").collect()} == {"users"}
    big = {r.key: int(r.value) for r in read_keyed_state(spark, at3, "big").collect()}
    every = {r.key: int(r.value) for r in read_keyed_state(spark, at3, "numbered").collect()}
    assert big and all(big[u] <= every[u] for u in big) and big != every


def test_bad_branches_are_refused_with_what_is_wrong() -> None:
    p = Pipeline("bad-branches", parallelism=2)
    stream = p.source(clicks())
    numbered = stream.key_by(lambda c: c["user"]).process(Numbered(), uid="n")
    main = numbered.sink(TransactionalFileSink("/tmp/a"))
    other = p.source(clicks(), uid="other").key_by(lambda c: c["user"]).process(Numbered(), uid="m")
    with pytest.raises(ValueError, match="branch 1 has no keyed stage of its own after the"):
        main.with_branches(numbered.map(str).sink(TransactionalFileSink("/tmp/b"), uid="b"))
    branch = numbered.key_by(lambda c: c["page"]).process(PerUserOfPage(), uid="pages")
    with pytest.raises(ValueError, match="branch 1's sink uid 'sink' is taken"):
        main.with_branches(branch.sink(TransactionalFileSink("/tmp/b")))
    with pytest.raises(ValueError, match="branch 1 reads other sources"):
        main.with_branches(other.sink(TransactionalFileSink("/tmp/b"), uid="b"))
    with pytest.raises(ValueError, match="missing sink"):
        main.with_branches(branch)
    timed = stream.assign_timestamps(WatermarkStrategy(lambda c: c["ts"]))
    lone = timed.key_by(lambda c: c["page"]).process(PerUserOfPage(), uid="pages")
    with pytest.raises(ValueError, match="branch 1 gives the source's records another event"):
        main.with_branches(lone.sink(TransactionalFileSink("/tmp/b"), uid="b"))
    a, b = p.source(clicks(), uid="a"), p.source(clicks(), uid="b")
    both = a.union(b)
    first = both.key_by(lambda c: c["user"]).process(Numbered(), uid="n")
    second = both.key_by(lambda c: c["page"]).process(Numbered(), uid="m")
    with pytest.raises(ValueError, match=r"shares no keyed stage .* and the pipeline has several"):
        first.sink(TransactionalFileSink("/tmp/a")).with_branches(
            second.sink(TransactionalFileSink("/tmp/b"), uid="b-sink")
        )
    with pytest.raises(ValueError, match=r"operator uids .* are not unique"):
        main.with_branches(
            numbered.key_by(lambda c: c["page"])
            .process(PerUserOfPage(), uid="n")
            .sink(TransactionalFileSink("/tmp/b"), uid="b")
        )
