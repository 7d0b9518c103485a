"""One SparkSession (local[2]) for every pipeline test in this process: the machine is
small and shared, and a session takes seconds to start."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from sparkpoint.pipeline.session import spark_session

    session = spark_session("local[2]", "sparkpoint-tests")
    yield session
    session.stop()
