"""The Kafka → Kafka orders job, exactly once through faults, on a real broker: kill -9 of
the driver (cold restart), of an executor (local-cluster), of the leading coordinator,
and a broker restart (kill -9 of the active driver with a warm standby: in the middle of a
rescale, test_kafka_rescale.py). Each reads the output topic with a ``read_committed``
consumer: every published record exactly once."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkpoint.ops.devcluster.kafka import LocalKafka
from tests.examples import kafka_support as ks
from tests.examples import processes
from tests.pipeline.processes import DriverProcess, executor_pids
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

LOCAL_CLUSTER = ("--master", "local-cluster[1,1,1024]")


def completed(driver: DriverProcess) -> int:
    return driver.latest().get("last_completed") or 0


def finish_exactly_once(
    driver: DriverProcess, kafka: LocalKafka, out: str, published: list[str]
) -> None:
    """Every record out, two more checkpoints (a duplicate would have had time to show),
    a clean stop, and the check."""
    wait_until(
        lambda: len(ks.output(kafka, out)) >= len(published),
        timeout=600,
        message="every record in the output",
    )
    done = completed(driver)
    wait_until(lambda: completed(driver) >= done + 2, timeout=300, message="two more checkpoints")
    driver.proc.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=120) == 0, driver.log.read_text()[-4000:]
    ks.verified(kafka, out, published)


def test_driver_killed_and_restarted(kafka: LocalKafka, tmp_path: Path) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=4)
    published = ks.publish(kafka, source, 0, 400)
    first = processes.start_kafka_orders_driver(tmp_path, kafka, job, source, out)
    try:
        wait_until(
            lambda: completed(first) >= 2 and len(ks.output(kafka, out)) > 0,
            timeout=300,
            message="a first committed checkpoint",
        )
    finally:
        first.kill()
    assert len(ks.output(kafka, out)) < 400, "the stream ended before the kill; publish more"
    published += ks.publish(kafka, source, 400, 60)
    second = processes.start_kafka_orders_driver(tmp_path, kafka, job, source, out)
    try:
        finish_exactly_once(second, kafka, out, published)
    finally:
        if second.proc.poll() is None:
            second.kill()
    assert second.latest()["restored_from"] is not None


def test_executor_killed_mid_stream(kafka: LocalKafka, tmp_path: Path) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=4)
    published = ks.publish(kafka, source, 0, 400)
    driver = processes.start_kafka_orders_driver(
        tmp_path, kafka, job, source, out, "--master", "local-cluster[2,1,1024]"
    )
    try:
        wait_until(
            lambda: completed(driver) >= 2 and len(ks.output(kafka, out)) > 0,
            timeout=600,
            message="a first committed checkpoint in local-cluster mode",
        )
        victims = executor_pids(driver.proc.pid)
        assert len(victims) == 2, victims
        os.kill(victims[0], signal.SIGKILL)
        published += ks.publish(kafka, source, 400, 60)
        finish_exactly_once(driver, kafka, out, published)
    finally:
        if driver.proc.poll() is None:
            driver.kill()


def test_broker_restarted_mid_stream(
    spark: SparkSession, kafka: LocalKafka, tmp_path: Path
) -> None:
    job, source, out = ks.fresh_topics(kafka, partitions=3)
    published = ks.publish(kafka, source, 0, 300)
    driver = ks.make_driver(spark, kafka, job, source, out, tmp_path / "ckpt", per_partition=20)
    try:
        ks.run_until(
            driver,
            lambda: (driver.status.last_completed or 0) >= 1 and len(ks.output(kafka, out)) > 0,
            "a first committed checkpoint",
        )
        kafka.restart_node(1)  # SIGTERM, then started again on the same ports and data
        published += ks.publish(kafka, source, 300, 60)
        ks.run_until_output(driver, kafka, out, len(published))
        driver.finish()
    finally:
        ks.close(driver)
    ks.verified(kafka, out, published)


def test_leader_killed_twice_mid_stream(
    tmp_path: Path, replicas: object, kafka: LocalKafka
) -> None:
    cluster: list[ReplicaProcess] = [replicas(name) for name in ("a", "b", "c")]  # type: ignore[operator]
    wait_leader(cluster, timeout=300)
    job, source, out = ks.fresh_topics(kafka, partitions=4)
    published = ks.publish(kafka, source, 0, 300)
    addresses = ",".join(f"127.0.0.1:{r.port}" for r in cluster)
    driver = processes.start_kafka_orders_driver(
        tmp_path / "job", kafka, job, source, out, "--coordinator", addresses
    )
    try:
        for kill in range(2):
            done = completed(driver)
            wait_until(
                lambda done=done: completed(driver) > done,
                timeout=600,
                message=f"a checkpoint completed before kill {kill + 1}",
            )
            leader = wait_leader(cluster, timeout=300)
            leader.kill()  # kill -9
            published += ks.publish(kafka, source, 300 + 30 * kill, 30)
            cluster = [r for r in cluster if r is not leader]
            wait_leader(cluster, timeout=300)
        finish_exactly_once(driver, kafka, out, published)
    finally:
        if driver.proc.poll() is None:
            driver.kill()
    assert len([r for r in driver.reports() if r.get("event") == "started"]) == 1
