"""Exactly-once from RabbitMQ to PostgreSQL with an executor JVM killed mid-stream: Spark's
local-cluster mode runs real executor processes; the lost one's tasks run again elsewhere
and the committed rows stay exactly the published messages."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from tests.examples import processes, support
from tests.pipeline.processes import executor_pids
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_executor_killed_mid_stream(
    rabbitmq: RabbitMQServer, postgres: PostgresServer, tmp_path: Path
) -> None:
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 300)
    driver = processes.start_orders_driver(
        tmp_path, rabbitmq, postgres, job_id, queue, "--master", "local-cluster[2,1,1024]"
    )
    try:
        wait_until(
            lambda: (
                (driver.latest().get("last_completed") or 0) >= 2
                and support.row_count(postgres) > 0
            ),
            timeout=600,
            message="a first committed checkpoint in local-cluster mode",
        )
        victims = executor_pids(driver.proc.pid)
        assert len(victims) == 2, victims
        os.kill(victims[0], signal.SIGKILL)
        done = driver.latest().get("last_completed") or 0
        published += support.publish_range(rabbitmq, queue, 300, 60)
        wait_until(
            lambda: support.row_count(postgres) >= 360,
            timeout=600,
            message="every message committed after the executor was lost",
        )
        # Two more checkpoints: a duplicate would have had time to be committed.
        wait_until(
            lambda: (driver.latest().get("last_completed") or 0) >= done + 2,
            timeout=300,
            message="two more completed checkpoints",
        )
        assert driver.proc.poll() is None, "the driver survived the executor's loss"
    finally:
        driver.proc.send_signal(signal.SIGTERM)
        code = driver.wait(timeout=120)
    assert code == 0, driver.log.read_text()[-4000:]
    support.verified(postgres, published)
