"""The RabbitMQ source's connection ends with its job: closing the driver closes it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from sparkpoint.examples.orders import CountPerKey, key_of
from sparkpoint.ops.devcluster.system_servers import RabbitMQServer
from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from sparkpoint.pipeline.sinks.files import TransactionalFileSink
from sparkpoint.pipeline.sources.rabbitmq import RabbitMQSource
from tests.examples import support
from tests.support.leftover_clients import StoppedServer, connected_to

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_closing_the_driver_closes_the_broker_connection(
    spark: SparkSession, rabbitmq: RabbitMQServer, tmp_path: Path
) -> None:
    job, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 30)
    sink = TransactionalFileSink(str(tmp_path / "out"))
    pipeline = (
        Pipeline(job, parallelism=2)
        .source(RabbitMQSource(rabbitmq.url, queue, consumers=2, batch_size=10))
        .key_by(key_of)
        .process(CountPerKey())
        .sink(sink)
    )
    driver = PipelineDriver(pipeline, spark, EmbeddedChannel(str(tmp_path / "ckpt")))
    broker = {rabbitmq.port: StoppedServer("RabbitMQ", "127.0.0.1", rabbitmq.port)}
    driver.start()
    try:
        support.run_until(
            driver, lambda: len(sink.committed_lines()) >= 30, "every message committed"
        )
        driver.finish()
        assert connected_to(os.getpid(), broker)  # the source's connection, while it runs
    finally:
        driver.close()
    assert sorted(json.loads(line)[0] for line in sink.committed_lines()) == published
    assert connected_to(os.getpid(), broker) == []
