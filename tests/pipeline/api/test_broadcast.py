"""Broadcast state on real Spark (local mode): payments keyed by user checked against
rules broadcast to every subtask. Every payment is checked against exactly the rules
read up to its epoch — a rule change takes effect at one epoch for every key — as an
offline computation says; the broadcast state is the same map on every subtask, at
parallelism 4, after a restore at 3 and after one at 6 (in each savepoint and the last
checkpoint), and the output exact, on both backends. Bad broadcast pipelines are
refused with errors that name what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkpoint.examples.fraud import (
    RULES,
    CheckPayments,
    expected_checks,
    fraud_pipeline,
    user_of,
)
from sparkpoint.ops.cli.main import main
from sparkpoint.pipeline import (
    BroadcastContext,
    ClickEventSource,
    Context,
    KeyedProcessFunction,
    MapStateDescriptor,
    Pipeline,
    TransactionalFileSink,
)
from sparkpoint.pipeline.api.broadcast import BROADCAST_STATE_PREFIX, BroadcastStates
from sparkpoint.pipeline.api.operator_state import OperatorStateStore, decode_element
from sparkpoint.pipeline.state_processor.operator_entries import read_operator_state_entries
from sparkpoint.recovery.loading import load_checkpoint
from sparkpoint.recovery.reader import read_operator_state
from sparkpoint.storage import CheckpointStorage
from tests.pipeline import support

PAYMENTS_PER_SPLIT, RULES_PER_EPOCH = 100, 2


def payments() -> ClickEventSource:
    """40 users over 4 splits, 4 epochs of 100 payments per split."""
    return ClickEventSource(
        splits=4, users=40, records_per_epoch=400, records_per_split=400, seed=7
    )


def rules() -> ClickEventSource:
    """One split, two rules per epoch, 4 epochs."""
    return ClickEventSource(
        splits=1, users=1, records_per_epoch=RULES_PER_EPOCH, records_per_split=8, seed=13
    )


def expected() -> tuple[list[str], dict[str, int]]:
    return expected_checks(
        payments().all_records(), rules().all_records(), PAYMENTS_PER_SPLIT, RULES_PER_EPOCH
    )


def committed(out: Path) -> list[str]:
    return sorted(TransactionalFileSink(str(out)).committed_lines())


def broadcast_state_per_subtask(pointer: str) -> dict[int, Any]:
    """Each subtask's broadcast map ``rules`` in the checkpoint or savepoint at ``pointer``,
    as the offline state reader reads it."""
    maps = {}
    for e in read_operator_state_entries(pointer, "check"):
        assert e.state == BROADCAST_STATE_PREFIX + "rules" and e.mode == "BROADCAST", e
        assert e.subtask not in maps, f"subtask {e.subtask}: two copies of the map"
        maps[e.subtask] = e.value
    return maps


def rules_read(pointer: str) -> dict[str, int]:
    """The rules map made by the rules a checkpoint's source offsets say were read."""
    checkpoint = load_checkpoint(CheckpointStorage(pointer), pointer).checkpoint
    handles = [h for s in checkpoint.operator_states["rules"].subtask_states.values()
               for h in s.operator]  # fmt: skip
    offsets = dict(decode_element(e) for e in read_operator_state(handles)["offsets"])
    _, limits = expected_checks([], rules().records_before(offsets), 1, RULES_PER_EPOCH)
    return limits


def test_every_key_checks_against_the_rules_of_its_epoch(spark: Any, tmp_path: Path) -> None:
    p = fraud_pipeline("fraud", payments(), rules(), str(tmp_path / "out"))
    assert [op.uid for op in p.job_graph().operators] == ["payments", "rules", "check", "sink"]
    driver = support.run_to_end(spark, p, tmp_path / "ckpt")
    lines, limits = expected()
    assert committed(tmp_path / "out") == lines
    assert driver.status.records == 1_600 + 8  # a broadcast record counted once
    # The rules changed every epoch, and payments saw each limit of a page in turn.
    seen = {(c["page"], c["limit"]) for c in map(json.loads, lines) if c["limit"] is not None}
    assert len(seen) > len({page for page, _ in seen})
    final = broadcast_state_per_subtask(str(tmp_path / "ckpt" / "fraud"))
    assert sorted(final) == [0, 1, 2, 3] and all(m == limits for m in final.values())

    # The same, as `sparkpoint state read --operator-state` prints it.
    chk = str(tmp_path / "ckpt" / "fraud")
    result = CliRunner().invoke(main, ["state", "read", chk, "--operator-state", "--uid", "check"])
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.output.splitlines()]
    assert [(p["subtask"], p["state"], p["mode"]) for p in printed] == [
        (i, "broadcast/rules", "BROADCAST") for i in range(4)
    ]
    assert all(p["value"] == limits for p in printed)
    every = CliRunner().invoke(main, ["state", "read", chk, "--operator-state"])
    assert every.exit_code == 0, every.output
    operators = {json.loads(line)["operator"] for line in every.output.splitlines()}
    assert {"payments", "rules", "check"} <= operators  # the sources' offsets, the maps
    wrong = CliRunner().invoke(main, ["state", "read", chk, "--operator-state", "--uid", "nope"])
    assert wrong.exit_code != 0 and "'nope' has no operator state" in wrong.output
    assert "check" in wrong.output  # the operators that have some are listed


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_broadcast_state_on_every_subtask_through_a_rescale_4_3_6(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    # Epochs 1-2 at parallelism 4, epoch 3 at 3, epoch 4 and the end at 6: after each,
    # every subtask holds the map the rules read so far make.
    out = tmp_path / "out"

    def fraud(parallelism: int) -> Pipeline:
        p = fraud_pipeline("fraud-rescale", payments(), rules(), str(out), parallelism)
        return p.with_state_backend(backend)

    at4 = support.savepoint_after(spark, fraud(4), tmp_path / "4", 1)
    at3 = support.savepoint_after(spark, fraud(3), tmp_path / "3", 0, restore_from=at4)
    support.run_to_end(spark, fraud(6), tmp_path / "6", restore_from=at3)
    for pointer, parallelism in ((at4, 4), (at3, 3), (str(tmp_path / "6" / "fraud-rescale"), 6)):
        maps = broadcast_state_per_subtask(pointer)
        assert sorted(maps) == list(range(parallelism))
        assert all(m == rules_read(pointer) for m in maps.values()) and maps[0], pointer
    lines, limits = expected()
    assert rules_read(str(tmp_path / "6" / "fraud-rescale")) == limits
    assert committed(out) == lines


def test_bad_broadcast_pipelines_are_refused_with_what_is_wrong() -> None:
    p = Pipeline("bad", parallelism=2)
    keyed = p.source(payments(), uid="payments").key_by(user_of)
    stream = p.source(rules(), uid="rules")
    with pytest.raises(TypeError, match="takes one or more MapStateDescriptor"):
        stream.broadcast()
    with pytest.raises(ValueError, match="two maps of one name"):
        stream.broadcast(RULES, MapStateDescriptor("rules"))
    with pytest.raises(ValueError, match="broadcast takes a stream that is not keyed"):
        stream.key_by(user_of).broadcast(RULES)
    with pytest.raises(ValueError, match="connects to a keyed stream: call key_by"):
        p.source(payments(), uid="payments").connect(stream.broadcast(RULES))
    with pytest.raises(TypeError, match="goes into a KeyedBroadcastProcessFunction"):
        keyed.connect(stream.broadcast(RULES)).process(KeyedProcessFunction())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a keyed stream connected to a broadcast one"):
        keyed.process(CheckPayments())
    with pytest.raises(ValueError, match="two sources with the uid 'payments'"):
        keyed.connect(p.source(rules(), uid="payments").broadcast(RULES))


def test_broadcast_state_misuse_is_named() -> None:
    store = OperatorStateStore()
    states = BroadcastStates(store, (RULES,))
    ctx = BroadcastContext([], 0, 1, None, states)
    ctx.get_broadcast_state(RULES).put("cart", 10)
    assert Context([], 0, 1, None, states).get_broadcast_state(RULES).get("cart") == 10
    assert store.snapshot()[BROADCAST_STATE_PREFIX + "rules"][1] == [{"cart": 10}]
    with pytest.raises(ValueError, match="broadcast state 'limits' was not given to broadcast"):
        ctx.get_broadcast_state(MapStateDescriptor("limits"))
    with pytest.raises(RuntimeError, match="process_broadcast_element has no key"):
        ctx.register_event_time_timer(5)
    with pytest.raises(RuntimeError, match="belongs to a KeyedBroadcastProcessFunction"):
        Context([], 0, 1).get_broadcast_state(RULES)
