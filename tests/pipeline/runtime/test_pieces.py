"""The pipeline's pieces without Spark: state views, partitioner, sources, the sink's
two phases, and the job graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.checkpoint import DistributionMode
from sparkpoint.examples.clicks import ClickTotals
from sparkpoint.pipeline import (
    ClickEventSource,
    EpochRange,
    FileSource,
    KeyGroupPartitioner,
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorListStateDescriptor,
    Pipeline,
    Slot,
    TransactionalFileSink,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.api.functions import InitializationContext, RuntimeContext
from sparkpoint.pipeline.api.keyed_state import KeyedStateBackend
from sparkpoint.pipeline.api.operator_state import OperatorStateStore
from sparkpoint.pipeline.sinks.files import IN_PROGRESS_DIR, SinkCommitError
from sparkpoint.statefiles import key_group_for_key, subtask_for_key_group


def test_keyed_state_views_follow_the_current_key_and_drop_empty_keys() -> None:
    backend = KeyedStateBackend()
    ctx = RuntimeContext(backend, 0, 1, 1)
    total = ctx.get_state(ValueStateDescriptor("total", 0))
    pages = ctx.get_list_state(ListStateDescriptor("pages"))
    counts = ctx.get_map_state(MapStateDescriptor("counts"))
    backend.set_current_key("a")
    total.update(total.value() + 5)
    pages.add("home")
    counts.put("home", 1)
    backend.set_current_key("b")
    assert total.value() == 0 and pages.get() == [] and counts.is_empty()
    total.update(1)
    backend.set_current_key("a")
    assert (total.value(), pages.get(), counts.items()) == (5, ["home"], [("home", 1)])
    total.clear()
    pages.update([])
    counts.remove("home")
    assert "a" not in backend.entries  # nothing left for "a": the key is gone
    assert backend.entries == {"b": {"total": 1}}
    with pytest.raises(ValueError, match="declared as"):
        ctx.get_list_state(ListStateDescriptor("total"))


def test_keyed_state_needs_a_current_key() -> None:
    state = RuntimeContext(KeyedStateBackend(), 0, 1, 1).get_state(ValueStateDescriptor("v"))
    with pytest.raises(RuntimeError, match="while processing"):
        state.value()


def test_operator_state_keeps_restored_names_and_checks_modes() -> None:
    store = OperatorStateStore({"old": (DistributionMode.UNION, [1, 2])})
    ctx = InitializationContext(store, 0, 2)
    assert ctx.is_restored
    new = ctx.get_list_state(OperatorListStateDescriptor("new", DistributionMode.BROADCAST))
    new.add("x")
    assert store.snapshot() == {
        "old": (DistributionMode.UNION, [1, 2]),
        "new": (DistributionMode.BROADCAST, ["x"]),
    }
    with pytest.raises(ValueError, match="BROADCAST"):
        ctx.get_list_state(OperatorListStateDescriptor("new", DistributionMode.UNION))


def test_partitioner_is_the_key_group_assignment_and_maps_slots() -> None:
    p = KeyGroupPartitioner(7, 128)
    for key in ("user-1", 42, ("a", 1), None, b"\x00"):
        assert p(key) == subtask_for_key_group(128, 7, key_group_for_key(key, 128))
    assert [p(Slot(i)) for i in range(7)] == list(range(7))


def test_generator_is_deterministic_and_keeps_each_user_on_one_split() -> None:
    a = list(ClickEventSource(splits=3, users=30, records_per_split=50).all_records())
    b = list(ClickEventSource(splits=3, users=30, records_per_split=50).all_records())
    assert a == b and len(a) == 150
    splits_of: dict[str, set[str]] = {}
    for split, _, event in a:
        splits_of.setdefault(event["user"], set()).add(split)
    assert all(len(s) == 1 for s in splits_of.values())
    by_split: dict[str, list[int]] = {}
    for split, _, event in a:
        by_split.setdefault(split, []).append(event["ts"])
    assert all(ts == sorted(set(ts)) for ts in by_split.values())


def test_generator_plans_bounded_epochs_and_restores_offsets() -> None:
    src = ClickEventSource(splits=2, records_per_epoch=4, records_per_split=3)
    first = src.plan_epoch()
    src.advance(first)
    assert src.plan_epoch() == [EpochRange("gen-0", 2, 3), EpochRange("gen-1", 2, 3)]
    again = ClickEventSource(splits=2, records_per_epoch=4, records_per_split=3)
    again.restore(src.offsets())
    src.advance(src.plan_epoch())
    assert src.exhausted and not again.exhausted


def test_file_source_reads_complete_lines_and_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"n": 1}\n{"n": 2}\n{"n": ')
    (tmp_path / "_ignored").write_text("x\n")
    src = FileSource(str(tmp_path), max_bytes_per_split=1024)
    ranges = src.plan_epoch()
    assert ranges == [EpochRange("a.jsonl", 0, 18)]
    assert [r for _, r in src.reader().read(ranges[0])] == [{"n": 1}, {"n": 2}]
    src.advance(ranges)
    assert src.plan_epoch() == []
    with (tmp_path / "a.jsonl").open("a") as f:
        f.write("3}\n")
    (tmp_path / "b.csv").write_text("u,1\n")
    csv_src = FileSource(str(tmp_path), format="csv", csv_fields=("user", "n"))
    csv_src.restore(src.offsets())
    planned = {r.split: r for r in csv_src.plan_epoch()}
    assert planned["a.jsonl"].start == 18
    assert list(csv_src.reader().read(planned["b.csv"])) == [(0, {"user": "u", "n": "1"})]


def test_file_source_cuts_a_window_at_its_last_newline(tmp_path: Path) -> None:
    lines = [json.dumps({"i": i}) for i in range(100)]
    (tmp_path / "f.jsonl").write_text("\n".join(lines) + "\n")
    src = FileSource(str(tmp_path), max_bytes_per_split=50)
    seen = []
    while ranges := src.plan_epoch():
        for r in ranges:
            seen += [rec["i"] for _, rec in src.reader().read(r)]
        src.advance(ranges)
    assert seen == list(range(100))


def test_a_bounded_file_source_ends_when_its_files_are_read_to_their_end(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"n": 1}\n{"n": 2}\n')
    (tmp_path / "b.jsonl").write_text('{"n": 3}\n')
    endless, bounded = FileSource(str(tmp_path)), FileSource(str(tmp_path), bounded=True)
    assert not bounded.exhausted
    ranges = bounded.plan_epoch()
    bounded.advance(ranges[:1])
    assert not bounded.exhausted  # b.jsonl is not read yet
    bounded.advance(ranges[1:])
    endless.advance(endless.plan_epoch())
    assert bounded.exhausted
    assert not endless.exhausted  # a directory may get more files
    restored = FileSource(str(tmp_path), bounded=True)
    restored.restore(bounded.offsets())
    assert restored.exhausted


def test_sink_two_phases_commit_once_and_restore_discards_later_output(tmp_path: Path) -> None:
    sink = TransactionalFileSink(str(tmp_path))
    w1 = sink.writer("a1", 1)
    f1 = w1.write(0, [{"a": 1}])
    assert w1.write(0, [{"a": 1}]) == f1  # a retried task leaves the file as it is
    assert w1.write(1, []) is None
    sink.epoch_written([f1])
    sink.pre_commit(5)
    elements = sink.snapshot(2)
    assert [len(e) for e in elements] == [1, 0]
    assert sink.committed_lines() == []  # pre-committed is not committed
    f2 = sink.writer("a1", 2).write(1, [{"b": 2}])
    sink.epoch_written([f2])  # written after checkpoint 5: replayed after a restore

    restored = TransactionalFileSink(str(tmp_path))
    restored.restore([e for part in elements for e in part])
    assert restored.committed_lines() == ['{"a":1}']
    assert not list((tmp_path / IN_PROGRESS_DIR).glob("*.jsonl"))
    restored.restore([e for part in elements for e in part])  # idempotent
    assert restored.committed_lines() == ['{"a":1}']

    lost = TransactionalFileSink(str(tmp_path / "other"))
    gone = lost.writer("e0", 1).write(0, [1])
    assert gone is not None
    Path(gone.in_progress).unlink()
    lost.epoch_written([gone])
    lost.pre_commit(1)
    with pytest.raises(SinkCommitError):
        lost.commit_up_to(1)


def test_an_aborted_transaction_commits_with_the_next_checkpoint(tmp_path: Path) -> None:
    sink = TransactionalFileSink(str(tmp_path))
    for epoch, txn in ((1, 3), (2, 4)):
        f = sink.writer("e0", epoch).write(0, [epoch])
        sink.epoch_written([f] if f else [])
        sink.pre_commit(txn)
    assert sink.commit_up_to(4) == 2  # 3 aborted, 4 completed: both commit
    assert sorted(sink.committed_lines()) == ["1", "2"]


def test_job_graph_has_three_acknowledging_operators_and_checks_the_pipeline(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="missing source, key_by, process, sink"):
        Pipeline("j").job_graph()
    p = (
        Pipeline("j", parallelism=3)
        .source(ClickEventSource())
        .key_by(lambda e: e["user"])
        .process(ClickTotals())
    )
    with pytest.raises(ValueError, match="missing sink"):
        p.job_graph()
    graph = p.sink(TransactionalFileSink(str(tmp_path))).job_graph()
    assert [(op.uid, op.parallelism, op.max_parallelism, op.keyed) for op in graph.operators] == [
        ("source", 3, 128, False),
        ("process", 3, 128, True),
        ("sink", 3, 128, False),
    ]
    assert len(graph.acknowledging_subtasks) == 9
    with pytest.raises(ValueError, match="not unique"):
        p.sink(TransactionalFileSink(str(tmp_path)), uid="process").job_graph()


def test_executors_load_no_coordinator_http_or_zookeeper_code() -> None:
    """Every Python worker imports the task modules: keep them light."""
    heavy = ("kazoo", "httpx", "sparkpoint.coordinator", "sparkpoint.client", "pyspark")
    tasks = "sparkpoint.pipeline.runtime.tasks, sparkpoint.pipeline.state.memory.tasks"
    code = f"import sys, {tasks}; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
