"""Kafka benchmark (not a test): Kafka → keyed running count → Kafka on sparkpoint, on
Spark Structured Streaming 4.3 and on Apache Flink 2.3, against one Kafka broker with the
same input.

Each system reads its own input topic (4 partitions) holding the same records — the
orders example's ``{"id", "key", "amount"}`` — and writes one output record
``[id, key, seq, amount]`` per input record to its own output topic, ``seq`` being the
key's running count (keyed state). Checkpoints / triggers every ``--interval`` seconds.

- sparkpoint: the orders job's Kafka variant (``run_orders --bootstrap``; KafkaSource,
  exactly-once KafkaSink), a driver process on ``local[2]``, parallelism 4, embedded
  coordinator (checkpoints on local disk).
- Spark: ``bench/spark_kafka_job.py`` — Spark's Kafka source and sink (spark-sql-kafka,
  the `spark-kafka` set), ``applyInPandasWithState``, ``local[2]``.
- Flink: ``bench/flink/KafkaRunningSum.java`` — flink-connector-kafka (the `flink-kafka`
  set), KafkaSink EXACTLY_ONCE, on the session cluster of ``bench/flink_cluster.py`` (two
  JobManagers with ZooKeeper HA, one TaskManager with one slot).

Figures per system: (1) records/s over the ``--records`` records published before the
start, from the start (process or job submission) until the last of their outputs is
visible to a ``read_committed`` consumer — start-up included; (2) with a producer adding
``--rate`` records/s, kill -9 of the driver (sparkpoint,
Spark; restarted at once on the same checkpoints) or of the leading JobManager (Flink:
the standby takes over), then the seconds from the kill until the output grows again;
(3) after the producer stopped and the output settled, the duplicates and losses a
``read_committed`` consumer counts. Ratios are to sparkpoint, in the same run.

Run:  uv sync --group bench --group flink-bench
      .venv/bin/python bench/kafka_bench.py [--records 20000] [--rate 200] [--interval 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from sparkpoint.examples.kafka_orders import create_topics
from sparkpoint.examples.orders import message
from sparkpoint.ops.devcluster.kafka import LocalKafka

KEYS = 1000
PARTITIONS = 4
SETTLE_S = 240.0


@dataclass
class Result:
    system: str
    records_per_s: float = 0.0
    recovery_s: float | None = None
    published: int = 0
    outputs: int = 0
    duplicates: int = 0
    losses: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


def publish(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20})  # fmt: skip
    for i in range(first, first + count):
        _, body = message(i, KEYS)
        while True:
            try:
                producer.produce(topic, body, key=json.loads(body)["key"].encode())
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full
    producer.flush(120)


class OutputWatch:
    """Counts the output a ``read_committed`` consumer sees, continuously (one consumer
    per output topic, reading from the start)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.ids: list[str] = []
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._stop = threading.Event()
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"bench-watch-{topic}",
             "isolation.level": "read_committed", "enable.auto.commit": False}
        )  # fmt: skip
        self._consumer.assign([TopicPartition(topic, 0, 0)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.consume(10_000, timeout=0.2):
                if m.error() is None:
                    now = time.monotonic()
                    self.first_at = self.first_at or now
                    self.last_at = now
                    self.ids.append(json.loads(m.value())[0])

    def count(self) -> int:
        return len(self.ids)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)  # polling the output watch


class SteadyProducer:
    def __init__(self, bootstrap: str, topic: str, first: int, rate: float) -> None:
        self.bootstrap, self.topic, self.next, self.rate = bootstrap, topic, first, rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True})
        started, first = time.monotonic(), self.next
        while not self._stop.is_set():
            due = first + int((time.monotonic() - started) * self.rate)
            while self.next < due:
                _, body = message(self.next, KEYS)
                producer.produce(self.topic, body, key=json.loads(body)["key"].encode())
                self.next += 1
            producer.poll(0.05)  # the producing tick
        producer.flush(60)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(90)
        return self.next


@dataclass
class Side:
    """One system under test: how to start it, kill it and bring it back."""

    name: str
    start: Callable[[], None]
    kill: Callable[[], None]
    restart: Callable[[], None]
    stop: Callable[[], None]


def measure(
    side: Side, kafka: LocalKafka, topics: tuple[str, str], args: argparse.Namespace
) -> Result:
    source, out = topics
    result = Result(side.name)
    publish(kafka.bootstrap, source, 0, args.records)
    watch = OutputWatch(kafka.bootstrap, out)
    try:
        began = time.monotonic()
        side.start()
        wait(lambda: watch.count() >= args.records, args.timeout, f"{side.name}: every record out")
        assert watch.first_at is not None and watch.last_at is not None
        # From the start: an exactly-once sink makes a checkpoint's output visible at
        # once, so the span between first and last visible record says little.
        result.records_per_s = args.records / (watch.last_at - began)
        result.notes["first_output_after_start_s"] = round(watch.first_at - began, 1)
        result.notes["all_output_after_start_s"] = round(watch.last_at - began, 1)
        producer = SteadyProducer(kafka.bootstrap, source, args.records, args.rate)
        grown = watch.count()
        wait(lambda: watch.count() > grown + args.rate, args.timeout, f"{side.name}: steady")
        time.sleep(args.interval * 2)  # a few steady checkpoints before the kill
        before = watch.count()
        killed = time.monotonic()
        side.kill()
        side.restart()
        wait(lambda: watch.count() > before, args.timeout, f"{side.name}: output again")
        result.recovery_s = time.monotonic() - killed
        time.sleep(args.interval * 3)
        result.published = producer.stop()
        expected = {message(i, KEYS)[0] for i in range(result.published)}
        wait(lambda: len(set(watch.ids)) >= len(expected), SETTLE_S, f"{side.name}: settled")
        time.sleep(args.interval * 3)  # a late duplicate would show by now
        seen: dict[str, int] = {}
        for mid in watch.ids:
            seen[mid] = seen.get(mid, 0) + 1
        result.outputs = len(watch.ids)
        result.duplicates = sum(n - 1 for n in seen.values())
        result.losses = len(expected - seen.keys())
    finally:
        watch.close()
        side.stop()
    return result


def _popen(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as f:
        return subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _killpg(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGKILL) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def process_side(name: str, command: list[str], work: Path) -> Side:
    """A system that is one driver process: kill -9 it, start it again."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        procs.append(_popen(command, work / f"{name}-{len(procs)}.log"))

    return Side(
        name,
        start=start,
        kill=lambda: _killpg(procs[-1]),
        restart=start,
        stop=lambda: _killpg(procs[-1], signal.SIGTERM),
    )


def sparkpoint_side(
    kafka: LocalKafka, topics: tuple[str, str], work: Path, interval: float
) -> Side:
    command = [
        sys.executable, "-m", "sparkpoint.examples.run_orders",
        "--job-id", "bench-kafka", "--bootstrap", kafka.bootstrap,
        "--input-topic", topics[0], "--output-topic", topics[1],
        "--checkpoint-dir", str(work / "sparkpoint-ckpt"), "--parallelism", "4",
        "--batch-size", "5000", "--interval-ms", str(int(interval * 1000)),
    ]  # fmt: skip
    return process_side("sparkpoint", command, work)


def spark_side(kafka: LocalKafka, topics: tuple[str, str], work: Path, interval: float) -> Side:
    command = [
        sys.executable, str(Path(__file__).with_name("spark_kafka_job.py")), kafka.bootstrap,
        *topics, str(work / "spark-ckpt"), f"{interval:g}",
    ]  # fmt: skip
    return process_side("spark", command, work)


def print_results(results: list[Result], args: argparse.Namespace) -> None:
    anchor = next((r for r in results if r.system == "sparkpoint"), results[0])
    print(f"\nKafka → keyed running count → Kafka; {args.records:,} records up front, then "
          f"{args.rate:g} records/s; checkpoint / trigger every {args.interval:g} s")  # fmt: skip
    print(f"{'system':<12}{'records/s':>11}{'ratio':>8}{'output again after kill':>26}"
          f"{'ratio':>8}{'published':>11}{'duplicates':>12}{'losses':>8}")  # fmt: skip
    for r in results:
        rate_ratio = r.records_per_s / anchor.records_per_s if anchor.records_per_s else 0
        rec = f"{r.recovery_s:.1f} s" if r.recovery_s is not None else "n/a"
        rec_ratio = (f"{r.recovery_s / anchor.recovery_s:.2f}x"
                     if r.recovery_s and anchor.recovery_s else "n/a")  # fmt: skip
        print(f"{r.system:<12}{r.records_per_s:>11,.0f}{rate_ratio:>7.2f}x{rec:>26}"
              f"{rec_ratio:>8}{r.published:>11,}{r.duplicates:>12,}{r.losses:>8,}")  # fmt: skip
    for r in results:
        if r.notes:
            print(f"  {r.system}: {json.dumps(r.notes)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s during the kill")
    parser.add_argument("--interval", type=float, default=2.0, help="checkpoint interval (s)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--systems", default="sparkpoint,spark,flink")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sparkpoint-kafka-bench-"))
    kafka = LocalKafka(work / "kafka").start()
    results: list[Result] = []
    try:
        for system in args.systems.split(","):
            topics = (f"in-{system}", f"out-{system}")
            create_topics(kafka.bootstrap, {topics[0]: PARTITIONS, topics[1]: 1})
            print(f"{system}: running", flush=True)
            if system == "flink":
                from kafka_flink_side import flink_measure

                results.append(flink_measure(kafka, topics, work, args, measure))
                continue
            make = sparkpoint_side if system == "sparkpoint" else spark_side
            results.append(measure(make(kafka, topics, work, args.interval), kafka, topics, args))
            print(f"  {results[-1]}", flush=True)
    finally:
        kafka.stop()
    print_results(results, args)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
