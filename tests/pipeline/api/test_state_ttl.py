"""State TTL (api/ttl.py, api/keyed_state.py): the views never return an expired value and
refresh on write (and on read with ``read_and_write``), processing time being the
backend's; a snapshot of either backend leaves out what has expired, which a real
pipeline restored from a bootstrapped savepoint shows in its next checkpoint."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.clicks import user_of
from sparkpoint.pipeline import ClickEventSource, EmbeddedChannel, Pipeline, PipelineDriver
from sparkpoint.pipeline.api.functions import Context, KeyedProcessFunction, RuntimeContext
from sparkpoint.pipeline.api.keyed_state import (
    KeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.api.ttl import (
    StateTtlConfig,
    TtlValue,
    drop_expired,
    live_store_entries,
    now_ms,
)
from sparkpoint.pipeline.sinks.files import TransactionalFileSink
from sparkpoint.pipeline.state.backend import StateBackend
from sparkpoint.pipeline.state_processor.entries import read_state_entries, write_savepoint_entries

DAY = 86_400_000
T0 = 1_000_000


def _context(time_ms: int = T0) -> tuple[KeyedStateBackend, RuntimeContext]:
    backend = KeyedStateBackend(processing_time_ms=time_ms)
    backend.set_current_key("k")
    return backend, RuntimeContext(backend, 0, 1, 0)


# -- the views ----------------------------------------------------------------------------


def test_a_value_expires_ttl_after_its_last_write() -> None:
    backend, ctx = _context()
    count = ctx.get_state(ValueStateDescriptor("count", 0, ttl=StateTtlConfig(100)))
    count.update(5)
    assert backend.entries["k"]["count"] == TtlValue(5, T0, 100)
    backend.processing_time_ms = T0 + 99
    assert count.value() == 5  # a read does not refresh under update_on="write"
    backend.processing_time_ms = T0 + 100
    assert count.value() == 0  # the default, never the expired value
    assert "k" not in backend.entries  # dropped when read
    count.update(6)
    backend.processing_time_ms = T0 + 150
    count.update(count.value() + 1)  # a write refreshes
    backend.processing_time_ms = T0 + 249
    assert count.value() == 7
    backend.processing_time_ms = T0 + 250
    assert count.value() == 0


def test_read_and_write_refreshes_on_read() -> None:
    backend, ctx = _context()
    ttl = StateTtlConfig(100, update_on="read_and_write")
    value = ctx.get_state(ValueStateDescriptor("v", ttl=ttl))
    items = ctx.get_list_state(ListStateDescriptor("l", ttl=ttl))
    value.update("a")
    items.add(1)
    backend.processing_time_ms = T0 + 60
    assert (value.value(), items.get()) == ("a", [1])
    backend.processing_time_ms = T0 + 159  # 99 ms after the reads, 159 after the writes
    assert (value.value(), items.get()) == ("a", [1])
    backend.processing_time_ms = T0 + 259
    assert (value.value(), items.get()) == (None, [])


def test_a_list_lives_and_expires_as_one_value() -> None:
    backend, ctx = _context()
    recent = ctx.get_list_state(ListStateDescriptor("recent", ttl=StateTtlConfig(100)))
    recent.add("a")
    backend.processing_time_ms = T0 + 50
    recent.add("b")  # refreshes the whole list
    backend.processing_time_ms = T0 + 149
    assert recent.get() == ["a", "b"]
    backend.processing_time_ms = T0 + 150
    assert recent.get() == []
    recent.add("c")  # a new list: nothing of the expired one
    assert recent.get() == ["c"]
    recent.update([])
    assert backend.entries == {}


def test_each_map_entry_expires_on_its_own() -> None:
    backend, ctx = _context()
    pages = ctx.get_map_state(MapStateDescriptor("pages", ttl=StateTtlConfig(100)))
    pages.put("home", 1)
    backend.processing_time_ms = T0 + 50
    pages.put("cart", 2)
    backend.processing_time_ms = T0 + 100  # home expired, cart not
    assert pages.get("home") is None and pages.get("home", 0) == 0
    assert not pages.contains("home") and pages.contains("cart")
    assert pages.items() == [("cart", 2)]
    assert (pages.keys(), pages.values(), pages.is_empty()) == (["cart"], [2], False)
    assert set(backend.entries["k"]["pages"]) == {"cart"}  # home dropped when read
    backend.processing_time_ms = T0 + 150
    assert pages.is_empty() and pages.items() == []
    assert backend.entries == {}  # the last entry gone takes the state with it


def test_a_map_read_refreshes_only_the_entry_read() -> None:
    backend, ctx = _context()
    ttl = StateTtlConfig(100, update_on="read_and_write")
    pages = ctx.get_map_state(MapStateDescriptor("pages", ttl=ttl))
    pages.put("home", 1)
    pages.put("cart", 2)
    backend.processing_time_ms = T0 + 80
    assert pages.get("home") == 1
    backend.processing_time_ms = T0 + 100
    assert pages.items() == [("home", 1)]


def test_a_shorter_ttl_applies_at_once_a_longer_one_from_the_next_write() -> None:
    backend = KeyedStateBackend({"k": {"v": TtlValue("x", T0, 100)}}, processing_time_ms=T0 + 60)
    backend.set_current_key("k")
    shorter = ValueStateDescriptor("v", ttl=StateTtlConfig(50))
    assert RuntimeContext(backend, 0, 1, 0).get_state(shorter).value() is None

    backend = KeyedStateBackend({"k": {"v": TtlValue("x", T0, 100)}}, processing_time_ms=T0 + 100)
    backend.set_current_key("k")
    longer = RuntimeContext(backend, 0, 1, 0).get_state(
        ValueStateDescriptor("v", ttl=StateTtlConfig(DAY))
    )
    assert longer.value() is None  # stored under 100 ms: expired by it
    # A value stored without a TTL has no age: kept until written under one.
    backend = KeyedStateBackend({"k": {"v": "plain"}}, processing_time_ms=T0)
    backend.set_current_key("k")
    adopted = RuntimeContext(backend, 0, 1, 0).get_state(
        ValueStateDescriptor("v", ttl=StateTtlConfig(DAY))
    )
    assert adopted.value() == "plain"
    adopted.update("new")
    assert backend.entries["k"]["v"] == TtlValue("new", T0, DAY)


def test_state_without_ttl_is_stored_as_it_is() -> None:
    backend, ctx = _context()
    ctx.get_state(ValueStateDescriptor("count", 0)).update(3)  # positional default
    ctx.get_list_state(ListStateDescriptor("l")).add(1)
    ctx.get_map_state(MapStateDescriptor("m")).put("a", 1)
    assert backend.entries == {"k": {"count": 3, "l": [1], "m": {"a": 1}}}


def test_bad_ttl_settings_are_named() -> None:
    with pytest.raises(ValueError, match="ttl_ms=0 must be a positive int"):
        StateTtlConfig(0)
    with pytest.raises(ValueError, match=r"ttl_ms=1\.5 must be a positive int"):
        StateTtlConfig(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="update_on='read' must be one of write, read_and_write"):
        StateTtlConfig(10, update_on="read")  # type: ignore[arg-type]
    _, ctx = _context()
    ctx.get_state(ValueStateDescriptor("count", 0, ttl=StateTtlConfig(10)))
    with pytest.raises(ValueError, match=r"state 'count' declared with ttl .*ttl_ms=10.* and None"):
        ctx.get_state(ValueStateDescriptor("count", 0))
    with pytest.raises(ValueError, match=r"ttl_ms=10.* and .*ttl_ms=20"):
        ctx.get_state(ValueStateDescriptor("count", 0, ttl=StateTtlConfig(20)))


# -- the snapshot's cleanup -------------------------------------------------------------


def test_drop_expired_leaves_out_only_what_has_expired() -> None:
    entry = {
        "gone": TtlValue(1, T0, 100),
        "kept": TtlValue(2, T0, DAY),
        "plain": 3,
        "map": {"old": TtlValue(1, T0, 100), "new": TtlValue(2, T0 + 50, 100), "p": 0},
        "dead_map": {"old": TtlValue(1, T0, 100)},
    }
    live = drop_expired(entry, T0 + 100)
    assert live == {
        "kept": TtlValue(2, T0, DAY),
        "plain": 3,
        "map": {"new": TtlValue(2, T0 + 50, 100), "p": 0},
    }
    assert "gone" in entry and len(entry["map"]) == 3  # the input is left as it was
    assert drop_expired({"gone": TtlValue(1, T0, 100)}, T0 + 100) is None
    unchanged = {"a": TtlValue(1, T0, 100), "b": {"x": 1}}
    assert drop_expired(unchanged, T0 + 99) is unchanged


def test_store_entries_keep_their_bytes_unless_something_expired() -> None:
    plain = pickle.dumps({"count": 3}, protocol=5)
    kept = pickle.dumps({"count": TtlValue(3, T0, DAY)}, protocol=5)
    part = pickle.dumps({"count": TtlValue(3, T0, 100), "other": 1}, protocol=5)
    gone = pickle.dumps({"count": TtlValue(3, T0, 100)}, protocol=5)
    out = list(
        live_store_entries(
            [(1, b"a", plain), (1, b"b", kept), (2, b"c", part), (3, b"d", gone)], T0 + 100
        )
    )
    assert [(g, k) for g, k, _ in out] == [(1, b"a"), (1, b"b"), (2, b"c")]
    assert out[0][2] is plain and out[1][2] is kept
    assert pickle.loads(out[2][2]) == {"other": 1}


class TtlCounts(KeyedProcessFunction):
    """Per user: a count and page counts, both under a one-day TTL."""

    def open(self, ctx: RuntimeContext) -> None:
        ttl = StateTtlConfig(DAY)
        self.count = ctx.get_state(ValueStateDescriptor("count", 0, ttl=ttl))
        self.pages = ctx.get_map_state(MapStateDescriptor("pages", ttl=ttl))

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        self.count.update(self.count.value() + 1)
        self.pages.put(value["page"], self.pages.get(value["page"], 0) + 1)
        ctx.collect({"user": key, "count": self.count.value()})


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_checkpoint_leaves_out_expired_state(spark: Any, tmp_path: Path, backend: str) -> None:
    source = ClickEventSource(splits=2, users=8, records_per_epoch=40, records_per_split=60)
    events = [event for _, _, event in source.all_records()]
    user = user_of(events[0])
    now = now_ms()
    old = 1_000  # expired long ago: written at 1 s after the epoch, for 1 s
    seeded = [
        ("ghost-expired", "count", TtlValue(5, old, 1_000)),
        ("ghost-live", "count", TtlValue(7, now, DAY)),
        ("ghost-map", "pages", {"home": TtlValue(1, old, 1_000), "cart": TtlValue(2, now, DAY)}),
        ("ghost-mixed", "count", TtlValue(5, old, 1_000)),
        ("ghost-mixed", "pages", {"home": TtlValue(3, now, DAY)}),
        ("ghost-plain", "count", 9),
        (user, "count", TtlValue(1_000, old, 1_000)),
        (user, "pages", {"home": TtlValue(1_000, old, 1_000)}),
    ]
    savepoint = write_savepoint_entries(
        seeded, str(tmp_path / "sp"), uid="process", parallelism=2, max_parallelism=16
    )
    # The reader shows values as the function sees them; keep_ttl as stored.
    shown = {(e.key, e.state): e.value for e in read_state_entries(savepoint)}
    assert shown["ghost-map", "pages"] == {"home": 1, "cart": 2}
    assert shown["ghost-expired", "count"] == 5  # what the savepoint holds, expired or not
    raw = {(e.key, e.state): e.value for e in read_state_entries(savepoint, keep_ttl=True)}
    assert raw["ghost-live", "count"] == TtlValue(7, now, DAY)

    # Full snapshots on rocksdb: its incremental ones upload the store's files as they are.
    state = StateBackend("rocksdb", incremental=False) if backend == "rocksdb" else backend
    p = (
        Pipeline("ttl", parallelism=2, max_parallelism=16)
        .source(source)
        .key_by(user_of)
        .process(TtlCounts())
        .sink(TransactionalFileSink(str(tmp_path / "out")))
        .with_state_backend(state)
    )
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=3_600_000)
    driver = PipelineDriver(p, spark, channel, restore_from=savepoint)
    assert driver.start() is not None
    driver.run()
    cid = driver.finish()
    driver.close()

    after = {
        (e.key, e.state): e.value
        for e in read_state_entries(channel.storage.checkpoint_directory("ttl", cid))
    }
    ghosts = {k: v for k, v in after.items() if k[0].startswith("ghost-")}
    assert ghosts == {
        ("ghost-live", "count"): 7,
        ("ghost-map", "pages"): {"cart": 2},
        ("ghost-mixed", "pages"): {"home": 3},
        ("ghost-plain", "count"): 9,
    }
    # The user's expired count and page were never returned: it counted from nothing.
    mine = [e for e in events if user_of(e) == user]
    pages: dict[str, int] = {}
    for e in mine:
        pages[e["page"]] = pages.get(e["page"], 0) + 1
    assert after[user, "count"] == len(mine)
    assert after[user, "pages"] == pages
    assert p.sink_op is not None
    counts = sorted(
        c["count"] for c in map(json.loads, p.sink_op.committed_lines()) if c["user"] == user
    )
    assert counts == list(range(1, len(mine) + 1))
