"""The exactly-once KafkaSink against a real broker, without Spark: a restored batch that
is in Kafka already is not produced again, one that is not is; a newer run fences the
older one; output is invisible to read_committed consumers until its batch commits."""

from __future__ import annotations

import pickle
from contextlib import suppress
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.pipeline.sinks.base import EpochOutput
from sparkpoint.pipeline.sinks.kafka import KafkaSink, KafkaSinkError, SinkIdentity, StagedChunk
from tests.examples import kafka_support as ks

pytestmark = [pytest.mark.slow]


def sink_for(kafka: LocalKafka, out: str, job: str) -> KafkaSink:
    sink = KafkaSink(kafka.bootstrap, out, timeout_s=30)
    sink.bind(job, "sink")
    return sink


def test_restored_batches_are_produced_once(kafka: LocalKafka) -> None:
    job, _, out = ks.fresh_topics(kafka, partitions=1)
    first = sink_for(kafka, out, job)
    first.restore([])
    first.epoch_written([EpochOutput(0, ("a", "b"))])
    first.pre_commit(3)
    checkpoint_3 = [e for part in first.snapshot(2) for e in part]
    first.epoch_written([EpochOutput(1, ("c",))])
    assert ks.output(kafka, out) == []  # nothing before its checkpoint completes
    first.commit_up_to(3)
    assert ks.settled_output(kafka, out) == ["a", "b"]
    first.pre_commit(4)
    checkpoint_4 = [e for part in first.snapshot(3) for e in part]
    # The "crash": checkpoint 4 completed, its notice never reached the sink.
    second = sink_for(kafka, out, job)
    second.restore(checkpoint_4 + checkpoint_3)  # 3 is in Kafka already, 4 is not
    assert ks.settled_output(kafka, out) == ["a", "b", "c"]
    third = sink_for(kafka, out, job)
    third.restore(checkpoint_4)
    assert ks.settled_output(kafka, out) == ["a", "b", "c"]
    for sink in (first, second, third):
        sink.close()


def test_a_newer_run_fences_the_older_one(kafka: LocalKafka) -> None:
    job, _, out = ks.fresh_topics(kafka, partitions=1)
    old = sink_for(kafka, out, job)
    old.restore([])
    new = sink_for(kafka, out, job)
    new.restore([])
    old.epoch_written([EpochOutput(0, ("late",))])
    old.pre_commit(7)
    with pytest.raises(KafkaSinkError, match="fenced"):
        old.commit_up_to(7)
    assert ks.output(kafka, out) == []
    new.close()


def test_staged_chunks_are_checkpoint_state() -> None:
    sink = KafkaSink("127.0.0.1:1", "t")
    sink.epoch_written([EpochOutput(0, tuple(range(25_000)))])
    sink.pre_commit(5)
    parts = sink.snapshot(2)
    elements = [pickle.loads(e) for part in parts for e in part]
    assert elements[0] == SinkIdentity("")  # bound to no job yet
    chunks = elements[1:]
    assert [type(c) for c in chunks] == [StagedChunk] * 3
    assert sum(len(c.records) for c in chunks) == 25_000


def test_another_jobs_open_transaction_holds_no_restore(kafka: LocalKafka) -> None:
    """Two jobs write one topic; one's driver dies in the middle of a commit, its
    transaction (records and commit-log record sent) left open for
    ``transaction.timeout.ms``. The other job restores and commits at once all the same."""
    _, _, out = ks.fresh_topics(kafka, partitions=1)
    stuck = sink_for(kafka, out, "job-x")
    dying = Producer(
        {"bootstrap.servers": kafka.bootstrap, "transactional.id": stuck.transactional_id}
    )
    dying.init_transactions(30)
    dying.begin_transaction()
    dying.produce(out, value=b'"x"')
    dying.produce(stuck.commit_log, key=stuck.transactional_id.encode(), value=b"1")
    assert dying.flush(30) == 0  # sent, never committed: the driver is "killed" here

    other = sink_for(kafka, out, "job-y")
    other.restore([])
    other.epoch_written([EpochOutput(0, ("y",))])
    other.pre_commit(1)
    checkpoint_1 = [e for part in other.snapshot(1) for e in part]
    other.commit_up_to(1)  # its commit-log record lies behind job x's open transaction
    other.close()
    # Job y restarts from checkpoint 1 while job x's transaction is still open: with one
    # commit log for both jobs its record of batch 1 was out of reach (the restore gave
    # up, or produced the batch again).
    again = sink_for(kafka, out, "job-y")
    again.restore(checkpoint_1)
    # Job x restarts: its producer fences the dead one and aborts its transaction.
    stuck.restore([])
    assert ks.settled_output(kafka, out) == ["y"]
    for sink in (again, stuck):
        sink.close()
    with suppress(KafkaException):  # fenced: its transaction cannot be ended any more
        dying.close()


def client_threads() -> int:
    """This process's threads: librdkafka runs several per client until it is destroyed."""
    return len(list(Path("/proc/self/task").iterdir()))


def test_a_closed_sink_leaves_no_client_behind(kafka: LocalKafka) -> None:
    job, _, out = ks.fresh_topics(kafka, partitions=1)
    before = client_threads()
    for _ in range(2):  # the second finds its commit log there already
        sink = sink_for(kafka, out, job)
        sink.restore([])
        sink.epoch_written([EpochOutput(0, ("a",))])
        sink.pre_commit(1)
        sink.commit_up_to(1)
        sink.close()
    # Nothing of the sink is left reconnecting (to a broker that may be gone by then).
    assert client_threads() == before
