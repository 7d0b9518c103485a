"""Notice delivery for heartbeats, and the hooks a restore uses."""

from __future__ import annotations

import pytest

from sparkpoint.coordinator import CompletionNotice, CoordinatorStoppedError, TriggerNotice
from sparkpoint.coordinator.notifications import Outbox

from .support import Harness


def test_notices_can_be_fetched_again_until_drained(harness: Harness) -> None:
    h = harness
    cid = h.trigger_next()
    h.ack_all(cid)
    notices = h.coordinator.notifications_since(0)
    assert [type(n) for n in notices] == [TriggerNotice, CompletionNotice]
    assert [n.seq for n in notices] == [1, 2]
    assert h.coordinator.notifications_since(1) == notices[1:]  # a lost reply, asked again
    assert notices[1].to_dict() == {
        "type": "complete",
        "seq": 2,
        "checkpoint_id": cid,
        "kind": "checkpoint",
        "metadata_uri": h.store.get_latest().metadata_uri,  # type: ignore[union-attr]
        "timestamp_ms": notices[0].timestamp_ms,  # when it was triggered
        "stop": False,
    }
    assert h.coordinator.drain_notifications() == notices
    assert h.coordinator.drain_notifications() == []


def test_outbox_keeps_only_its_capacity() -> None:
    outbox = Outbox(capacity=3)
    for cid in range(1, 6):
        outbox.abort(cid, "x")
    assert [n.checkpoint_id for n in outbox.since(0)] == [3, 4, 5]
    assert outbox.last_seq == 5


def test_set_counter_above_only_moves_up(harness: Harness) -> None:
    h = harness
    assert h.coordinator.set_counter_above(41) == 42
    assert h.coordinator.set_counter_above(7) == 42
    assert h.trigger_next() == 42
    h.coordinator.stop()
    with pytest.raises(CoordinatorStoppedError):
        h.coordinator.trigger_checkpoint()
