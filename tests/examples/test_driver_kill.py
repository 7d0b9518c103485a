"""Exactly-once through a driver process killed with SIGKILL mid-stream and restarted:
its unacknowledged messages come back from the broker, its prepared transactions are
committed or rolled back by the restarted driver."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from tests.examples import processes, support
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_driver_killed_and_restarted(
    rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 300)
    first = processes.start_orders_driver(tmp_path, rabbitmq, postgres, job_id, queue)
    try:
        wait_until(
            lambda: (
                (first.latest().get("last_completed") or 0) >= 2 and support.row_count(postgres) > 0
            ),
            timeout=300,
            message="a first committed checkpoint",
        )
    finally:
        first.kill()
    killed_with = support.row_count(postgres)
    assert killed_with < 300, "the stream ended before the kill; publish more"
    published += support.publish_range(rabbitmq, queue, 300, 60)
    second = processes.start_orders_driver(tmp_path, rabbitmq, postgres, job_id, queue)
    try:
        wait_until(second.reports, timeout=600, message="the driver restarted")
        wait_until(
            lambda: support.row_count(postgres) >= 360,
            timeout=600,
            message="every message committed after the restart",
        )
        # Two more checkpoints: a duplicate would have had time to be committed.
        done = second.latest().get("last_completed") or 0
        wait_until(
            lambda: (second.latest().get("last_completed") or 0) >= done + 2,
            timeout=300,
            message="two more completed checkpoints",
        )
    finally:
        second.proc.send_signal(signal.SIGTERM)
        code = second.wait(timeout=120)
    assert code == 0, second.log.read_text()[-4000:]
    assert second.latest()["restored_from"] is not None
    support.verified(postgres, published)
