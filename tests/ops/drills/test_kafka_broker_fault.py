"""The chaos drill knows ``kafka-broker-restart`` but plans it only when asked for (a job
that reads Kafka): the default plans stay what they were."""

from __future__ import annotations

from sparkpoint.ops.drills.chaos import FAULTS, plan_faults
from sparkpoint.ops.drills.kafka_broker import KAFKA_BROKER_RESTART


def test_planned_only_when_named() -> None:
    assert KAFKA_BROKER_RESTART not in plan_faults(1, 50)
    assert set(plan_faults(1, 5, (KAFKA_BROKER_RESTART,))) == {KAFKA_BROKER_RESTART}
    assert KAFKA_BROKER_RESTART not in FAULTS
