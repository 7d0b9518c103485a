"""The exactly-once KafkaSink against a real broker, without Spark: a restored batch that
is in Kafka already is not produced again, one that is not is; a newer run fences the
older one; output is invisible to read_committed consumers until its batch commits."""

from __future__ import annotations

import pickle

import pytest

from sparkpoint.devcluster.kafka import LocalKafka
from sparkpoint.pipeline.sinks.base import EpochOutput
from sparkpoint.pipeline.sinks.kafka import KafkaSink, KafkaSinkError, StagedChunk
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
    assert ks.output(kafka, out) == ["a", "b"]
    first.pre_commit(4)
    checkpoint_4 = [e for part in first.snapshot(3) for e in part]
    # The "crash": checkpoint 4 completed, its notice never reached the sink.
    second = sink_for(kafka, out, job)
    second.restore(checkpoint_4 + checkpoint_3)  # 3 is in Kafka already, 4 is not
    assert ks.output(kafka, out) == ["a", "b", "c"]
    third = sink_for(kafka, out, job)
    third.restore(checkpoint_4)
    assert ks.output(kafka, out) == ["a", "b", "c"]
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
    chunks = [pickle.loads(e) for part in parts for e in part]
    assert [type(c) for c in chunks] == [StagedChunk] * 3
    assert sum(len(c.records) for c in chunks) == 25_000
