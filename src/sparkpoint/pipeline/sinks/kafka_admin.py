"""Kafka topics made sure of (the sink's commit log, the examples' topics)."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    """Create the topics (name → partitions) unless they exist; wait until they serve."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n) for t, n in partitions.items()])
    for future in futures.values():
        # exception(), not result(): a raised error's traceback would hold this frame,
        # and with it the client, in a cycle — its threads would live on, reconnecting
        # to a broker long gone, until a garbage collection.
        error = future.exception(60)
        if error is None:
            continue
        if not (
            isinstance(error, KafkaException)
            and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
        ):
            raise error
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=10).topics
        if all(
            t in topics and len(topics[t].partitions) >= n and topics[t].error is None
            for t, n in partitions.items()
        ):
            return
        time.sleep(0.1)  # topic metadata is propagating
    raise TimeoutError(f"topics {sorted(partitions)} not ready in 60 s")
