"""Timers on real Spark (local mode): every event-time timer registered and not deleted
fires exactly once, in timestamp order per key, as an offline computation says — also
across a stop with a savepoint at parallelism 4 and a restart at 3 (the timers move with
their keys' key groups), on both state backends, and with a checkpoint after every
epoch (the end of the input still fires the last timers). A processing-time timeout fires
once per silent key."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.alerts import alerts_pipeline
from sparkpoint.examples.sessions import epoch_watermarks
from sparkpoint.pipeline import (
    ClickEventSource,
    Context,
    EmbeddedChannel,
    FileSource,
    KeyedProcessFunction,
    Pipeline,
    PipelineDriver,
    RuntimeContext,
    TransactionalFileSink,
    ValueStateDescriptor,
    WatermarkStrategy,
)
from sparkpoint.pipeline.api.event_time import MAX_WATERMARK
from sparkpoint.pipeline.api.keyed_state import KeyedStateBackend
from sparkpoint.pipeline.api.timers import EVENT_TIME, TimerService
from sparkpoint.pipeline.sinks.files import IN_PROGRESS_DIR
from tests.pipeline import support

SPLITS, USERS, PER_SPLIT, PER_EPOCH = 4, 200, 600, 400
DELAY_MS = 1_000


def clicks() -> ClickEventSource:
    return ClickEventSource(
        splits=SPLITS, users=USERS, records_per_epoch=PER_EPOCH, records_per_split=PER_SPLIT
    )


def ts_of(event: dict[str, Any]) -> int:
    return int(event["ts"])


def user_of(event: dict[str, Any]) -> str:
    return str(event["user"])


class Reminders(KeyedProcessFunction):
    """A reminder DELAY_MS after each click; a help click cancels the pending one."""

    def open(self, ctx: RuntimeContext) -> None:
        self.pending = ctx.get_state(ValueStateDescriptor("pending"))

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        previous = self.pending.value()
        if value["page"] == "help" and previous is not None:
            ctx.delete_event_time_timer(previous)
        assert ctx.timestamp is not None
        ctx.register_event_time_timer(ctx.timestamp + DELAY_MS)
        self.pending.update(ctx.timestamp + DELAY_MS)

    def on_timer(self, timestamp: int, key: Any, ctx: Context) -> None:
        assert ctx.time_domain == EVENT_TIME and ctx.timestamp == timestamp  # type: ignore[attr-defined]
        assert ctx.current_watermark() >= timestamp
        ctx.collect({"user": key, "timer": timestamp, "watermark": ctx.current_watermark()})
        if self.pending.value() == timestamp:
            self.pending.clear()


def reminders(job_id: str, out: Path, parallelism: int, backend: str) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(clicks())
        .assign_timestamps(WatermarkStrategy(ts_of))
        .key_by(user_of)
        .process(Reminders(), uid="reminders")
        .sink(TransactionalFileSink(str(out)))
        .with_state_backend(backend)
    )


def expected_timers() -> set[tuple[str, int]]:
    """Offline: the timers that fire. A help click deletes the previous reminder only if
    it has not fired yet: it fired when it is at or below the watermark of the epoch the
    help click is read in (timers fire at an epoch's start)."""
    records = list(clicks().all_records())
    per_split = PER_EPOCH // SPLITS
    marks = epoch_watermarks(records, per_split, 0)
    fired: set[tuple[str, int]] = set()
    pending: dict[str, int] = {}
    registered: set[tuple[str, int]] = set()
    for _, position, event in sorted(records, key=lambda r: (r[1] // per_split, r[0], r[1])):
        user, mark = user_of(event), marks[position // per_split + 1]
        previous = pending.get(user)
        if event["page"] == "help" and previous is not None and previous > mark:
            registered.discard((user, previous))
        registered.add((user, ts_of(event) + DELAY_MS))
        pending[user] = ts_of(event) + DELAY_MS
    fired |= registered
    return fired


def committed_in_order(out: Path) -> list[dict[str, Any]]:
    """Committed outputs, each file's lines in the order they were emitted."""
    sink = TransactionalFileSink(str(out))
    return [json.loads(x) for x in sink.committed_lines()]


def assert_fired_once_in_order(outputs: list[dict[str, Any]]) -> None:
    fired = [(o["user"], o["timer"]) for o in outputs]
    assert len(fired) == len(set(fired)), "a timer fired twice"
    assert set(fired) == expected_timers(), "timers lost or made up"
    # Emission order: by the watermark they fired under (it only grows, across restores
    # too: it is in the checkpoint), then as emitted (a stable sort).
    per_user: dict[str, list[int]] = {}
    for o in sorted(outputs, key=lambda o: o["watermark"]):
        per_user.setdefault(o["user"], []).append(o["timer"])
    assert all(ts == sorted(ts) for ts in per_user.values()), "timers out of order for a key"


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_event_time_timers_fire_once_in_order_across_a_rescale_4_to_3(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    out = tmp_path / "out"
    savepoint = support.savepoint_after(
        spark, reminders("reminders", out, 4, backend), tmp_path, epochs=3
    )
    before = committed_in_order(out)
    assert before, "some timers fired before the savepoint"
    # Timers still pending in the savepoint: those of the last clicks read.
    support.run_to_end(
        spark, reminders("reminders", out, 3, backend), tmp_path / "ckpt3", restore_from=savepoint
    )
    assert_fired_once_in_order(committed_in_order(out))


def test_a_checkpoint_every_epoch_does_not_hold_back_the_end_of_input(
    spark: Any, tmp_path: Path
) -> None:
    # Checkpoints due more often than epochs run: after the input ends, every epoch is
    # one a trigger brings, and the last watermark must still come in one of them.
    out = tmp_path / "out"
    driver = PipelineDriver(
        reminders("reminders", out, 2, "memory"),
        spark,
        EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=10),
    )
    driver.start()
    driver.run(max_epochs=PER_SPLIT * SPLITS // PER_EPOCH + 5)  # bounded, should it not end
    assert driver.status.watermark == MAX_WATERMARK, "the end of input never came"
    driver.finish()
    driver.close()
    assert len(driver.status.completed) > PER_SPLIT * SPLITS // PER_EPOCH // 2
    assert_fired_once_in_order(committed_in_order(out))


def test_the_check_fails_on_a_lost_or_repeated_timer() -> None:
    outputs = [{"user": u, "timer": t, "watermark": t} for u, t in sorted(expected_timers())]
    assert_fired_once_in_order(outputs)
    with pytest.raises(AssertionError, match="twice"):
        assert_fired_once_in_order([*outputs, outputs[0]])
    with pytest.raises(AssertionError, match="lost"):
        assert_fired_once_in_order(outputs[1:])
    first, second = (
        outputs[0],
        next(o for o in outputs if o["user"] == outputs[0]["user"] and o is not outputs[0]),
    )
    swapped = [o for o in outputs if o not in (first, second)] + [
        {**second, "watermark": 0},
        {**first, "watermark": 1},
    ]
    with pytest.raises(AssertionError, match="out of order"):
        assert_fired_once_in_order(swapped)


def test_timer_service_fires_in_timestamp_order_and_skips_deleted() -> None:
    backend = KeyedStateBackend({})
    service = TimerService(backend, processing_time_ms=0, watermark=100)
    for key, ts in (("b", 50), ("a", 50), ("a", 20), ("c", 200)):
        backend.set_current_key(key)
        service.register(EVENT_TIME, ts)
    backend.set_current_key("a")
    service.delete(EVENT_TIME, 20)
    service.collect_due(backend.items())
    assert [(k, ts) for k, ts, _ in service.pop_due()] == [("a", 50), ("b", 50)]
    assert {k: e["_timers"] for k, e in backend.items()} == {"c": [(200, EVENT_TIME)]}
    with pytest.raises(TypeError, match="int of milliseconds"):
        service.register(EVENT_TIME, 1.5)


def _lines_so_far(out: Path) -> list[dict[str, Any]]:
    paths = [*out.glob("part-*.jsonl"), *(out / IN_PROGRESS_DIR).glob("*.jsonl")]
    return [json.loads(x) for p in paths for x in p.read_text().splitlines()]


def test_a_silent_key_is_alerted_once_in_processing_time(spark: Any, tmp_path: Path) -> None:
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    events = [{"device": d, "n": n} for n in range(3) for d in ("a", "b", "c")]
    (inbox / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    p = alerts_pipeline(
        "alerts", FileSource(str(inbox)), TransactionalFileSink(str(out)),
        lambda e: e["device"], timeout_ms=300,
    )  # fmt: skip
    driver = PipelineDriver(
        p,
        spark,
        EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=support.MANUAL),
        timer_interval_ms=50,
    )
    driver.start()
    deadline = time.monotonic() + 120

    def alerted(_: PipelineDriver) -> bool:
        assert time.monotonic() < deadline, "no alert within 120 s"
        return {o["key"] for o in _lines_so_far(out)} == {"a", "b", "c"}

    driver.run(until=alerted)
    driver.finish()
    driver.close()
    alerts = committed_in_order(out)
    assert sorted(o["key"] for o in alerts) == ["a", "b", "c"]  # once each
    assert all(o["last_event"] == {"device": o["key"], "n": 2} for o in alerts)
