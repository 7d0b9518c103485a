"""A warm standby driver takes over the queue-to-database job when the active driver is
killed with kill -9: real RabbitMQ, real PostgreSQL, real coordinator processes, and two
real driver processes in Spark's local-cluster mode (each with a real executor JVM).
Every message published is committed exactly once, and the standby commits the
transactions the killed driver had pre-committed for its last checkpoint."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from sparkpoint.ops.drills.kill_driver import standby_ready
from tests.examples import processes, support
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

LOCAL_CLUSTER = ("--master", "local-cluster[1,1,1024]")


def test_active_driver_killed_the_standby_goes_on_exactly_once(
    tmp_path: Path, replicas: object, rabbitmq: RabbitMQServer, postgres: PostgresServer
) -> None:
    cluster: list[ReplicaProcess] = [replicas(n) for n in ("a", "b")]  # type: ignore[operator]
    wait_leader(cluster, timeout=300)
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 240)
    addresses = ",".join(f"127.0.0.1:{r.port}" for r in cluster)
    work = tmp_path / "job"
    active = processes.start_orders_driver(
        work, rabbitmq, postgres, job_id, queue, "--coordinator", addresses, *LOCAL_CLUSTER
    )
    drivers = [active]
    try:
        wait_until(
            lambda: (active.latest().get("last_completed") or 0) >= 1,
            timeout=600,
            message="the active driver completes a checkpoint",
        )
        standby = processes.start_orders_driver(
            work, rabbitmq, postgres, job_id, queue, "--coordinator", addresses, "--standby",
            *LOCAL_CLUSTER,
        )  # fmt: skip
        drivers.append(standby)
        wait_until(
            lambda: standby_ready([r.address for r in cluster], job_id),
            timeout=600,
            message="the standby waits, warm",
        )
        assert not any(r.get("event") == "started" for r in standby.reports())

        active.kill()  # kill -9, its JVM too
        published += support.publish_range(rabbitmq, queue, 240, 60)
        wait_until(
            lambda: any(r.get("event") == "started" for r in standby.reports()),
            timeout=300,
            message="the standby is granted the job and restores",
        )
        started = next(r for r in standby.reports() if r.get("event") == "started")
        assert (started["restored_from"] or 0) >= 1
        wait_until(
            lambda: support.row_count(postgres) >= len(published),
            timeout=600,
            message="every message committed",
        )
        done = standby.latest().get("last_completed") or 0
        wait_until(
            lambda: (standby.latest().get("last_completed") or 0) >= done + 2,
            timeout=300,
            message="two more completed checkpoints",
        )
        standby.proc.send_signal(signal.SIGTERM)
        assert standby.wait(timeout=120) == 0, standby.log.read_text()[-4000:]
    finally:
        for driver in drivers:
            if driver.proc.poll() is None:
                driver.kill()
    support.verified(postgres, published)
