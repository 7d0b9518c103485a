"""Fixtures: a real RabbitMQ broker, a real PostgreSQL server and a real Kafka (KRaft)
per test module (each takes a few seconds to start). The conftest of a directory whose
tests use them imports them."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQServer]:
    server = RabbitMQServer(tmp_path_factory.mktemp("rabbitmq")).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    # Not under pytest's tmp dir: that is private to root, and the server runs as postgres.
    directory = Path(tempfile.mkdtemp(prefix="sparkpoint-pg-"))
    server = PostgresServer(directory).start()
    yield server
    server.close()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    cluster = LocalKafka(tmp_path_factory.mktemp("kafka")).start()
    yield cluster
    cluster.stop()
