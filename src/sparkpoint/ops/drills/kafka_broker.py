"""The chaos drill's ``kafka-broker-restart`` fault: when the job reads Kafka, one broker
of its cluster is stopped (SIGTERM, a controlled shutdown) and started again on the same
ports and data; the job must checkpoint again afterwards. Offered only for a workload that
says which Kafka it reads (a ``kafka`` attribute holding its :class:`LocalKafka`)."""

from __future__ import annotations

import random
import time
from typing import Protocol, runtime_checkable

from sparkpoint.ops.devcluster.kafka import KafkaLaunchError, LocalKafka
from sparkpoint.ops.drills.cluster import DrillError, LocalCluster
from sparkpoint.ops.drills.invariants import Invariant
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import IterationResult

KAFKA_BROKER_RESTART = "kafka-broker-restart"


@runtime_checkable
class ReadsKafka(Protocol):
    kafka: LocalKafka


def kafka_broker_fault(
    target: LocalCluster,
    observer: ClusterObserver,
    deadline_s: float,
    n: int,
    before: Observation,
    rng: random.Random,
) -> IterationResult:
    workload = target.workload
    if not isinstance(workload, ReadsKafka):
        raise DrillError(f"{KAFKA_BROKER_RESTART} needs a job that reads Kafka")
    kafka = workload.kafka
    node = rng.choice(kafka.running_nodes() or [1])
    max_before = max((cid for cid, _ in before.completions), default=0)
    t0 = time.monotonic() - observer.started
    try:
        kafka.restart_node(node)
        back = Invariant("kafka_broker_rejoined", True, f"node {node} serving again")
    except KafkaLaunchError as exc:
        back = Invariant("kafka_broker_rejoined", False, str(exc))
    restarted = time.monotonic() - observer.started
    found = observer.wait_for(
        lambda o: next(
            (at for cid, at in o.completions if cid > max_before and at >= restarted), None
        ),
        deadline_s,
    )
    ckpt_at = float(found) if isinstance(found, float) else None
    obs = observer.snapshot()
    result = IterationResult(
        n,
        f"{KAFKA_BROKER_RESTART} node {node} of {len(kafka.nodes)}",
        time_to_checkpoint_s=None if ckpt_at is None else ckpt_at - t0,
        old_epoch=before.leader_epoch,
        new_epoch=obs.leader_epoch,
        new_leader=obs.leader_instance,
        notes={"broker_restart_s": round(restarted - t0, 3)},
    )
    result.invariants += [
        back,
        Invariant(
            "checkpoints_go_on",
            ckpt_at is not None,
            "a checkpoint completed after the restart"
            if ckpt_at is not None
            else f"nothing completed within {deadline_s:g} s of the restart",
        ),
    ]
    return result
