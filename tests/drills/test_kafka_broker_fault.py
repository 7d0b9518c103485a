"""The chaos drill plans ``kafka-broker-restart`` only for the Kafka workload (``--workload
kafka``, a job that reads Kafka): named for another workload it is refused by name."""

from __future__ import annotations

from sparkpoint.drills.chaos import FAULTS, plan_faults
from sparkpoint.drills.kafka_broker import KAFKA_BROKER_RESTART


def test_planned_only_when_named() -> None:
    assert KAFKA_BROKER_RESTART not in plan_faults(1, 50)
    assert set(plan_faults(1, 5, (KAFKA_BROKER_RESTART,))) == {KAFKA_BROKER_RESTART}
    assert KAFKA_BROKER_RESTART not in FAULTS


def test_named_without_the_kafka_workload_it_is_refused_by_name() -> None:
    from tests.drills.test_exit_codes import run_cli

    done = run_cli("chaos", "--local", "--fault", KAFKA_BROKER_RESTART)
    assert done.returncode == 2
    assert "kafka-broker-restart needs --workload kafka" in done.stderr


def test_the_kafka_workload_has_no_state_backend_option() -> None:
    from tests.drills.test_exit_codes import run_cli

    done = run_cli("chaos", "--local", "--workload", "kafka", "--state-backend", "rocksdb")
    assert done.returncode == 2
    assert "the Kafka workload's orders job keeps its state in memory" in done.stderr
