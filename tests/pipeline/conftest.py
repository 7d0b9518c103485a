"""One SparkSession (local[2]) for every pipeline test in this process: the machine is
small and shared, and a session takes seconds to start. And two coordinator replicas
for the tests that run the pipeline through the service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.service.support import ReplicaProcess, wait_leader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from sparkpoint.pipeline.runtime.spark_session import spark_session

    session = spark_session("local[2]", "sparkpoint-tests")
    yield session
    session.stop()


@pytest.fixture
def cluster(replicas) -> list[ReplicaProcess]:
    """Two coordinator replicas of a fresh cluster id, one of them leading."""
    spawned = [replicas(name) for name in ("a", "b")]
    wait_leader(spawned)
    return spawned
