"""The chaos drill's Kafka workload: the orders example reading a topic of a local KRaft
Kafka and writing another through the transactional Kafka sink
(``sparkpoint.examples.run_orders --bootstrap``), as a driver process against the
replicas, with a feed publishing into the input topic all along. With it the chaos drill
can restart a broker (``kafka-broker-restart``), and its exactly-once check reads the
output topic ``read_committed``: every published record's row exactly once, every key's
running count exactly 1..n."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from sparkpoint.ops.devcluster.kafka import KafkaLaunchError, LocalKafka
from sparkpoint.ops.drills.invariants import EXACTLY_ONCE, Invariant, check_exactly_once
from sparkpoint.ops.drills.workload import DriverProcess, kill_group

INPUT_TOPIC, OUTPUT_TOPIC = "orders", "orders-seen"
_IO = (sys.executable, "-m", "sparkpoint.ops.drills.kafka_orders_io")


class KafkaWorkloadError(RuntimeError):
    """Kafka, its topics or the feed could not be set up."""


@dataclass
class KafkaOrdersPipeline(DriverProcess):
    job_id: str = "orders"
    #: Brokers of the local Kafka (1 or 3; with 1, a broker restart is an outage).
    kafka_nodes: int = 1
    partitions: int = 2
    kafka: LocalKafka = field(init=False)
    feed: subprocess.Popen[bytes] | None = None

    @property
    def published_log(self) -> str:
        return str(self.directory / "published.txt")

    def command(self, records_per_split: int) -> list[str]:
        if records_per_split:
            raise ValueError("the Kafka workload's stream is the topic: it has no bound")
        return [
            sys.executable, "-m", "sparkpoint.examples.run_orders",
            "--job-id", self.job_id, "--bootstrap", self.kafka.bootstrap,
            "--input-topic", INPUT_TOPIC, "--output-topic", OUTPUT_TOPIC,
            "--checkpoint-dir", str(self.directory / "unused-embedded-checkpoints"),
            "--master", "local[1]", "--parallelism", str(self.parallelism),
            "--batch-size", "1000", "--interval-ms", str(self.interval_ms),
        ]  # fmt: skip

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self.kafka = LocalKafka(self.directory / "kafka", nodes=self.kafka_nodes).start()
        except KafkaLaunchError as exc:
            raise KafkaWorkloadError(f"Kafka did not start: {exc}") from exc
        self._io("topics", "--partitions", str(self.partitions))
        with open(self.directory / "feed.log", "ab") as log:
            self.feed = subprocess.Popen(
                [*_IO, "feed", "--bootstrap", self.kafka.bootstrap, "--input-topic", INPUT_TOPIC,
                 "--published", self.published_log],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        super().start()

    def _io(self, command: str, *extra: str) -> str:
        done = subprocess.run(
            [*_IO, command, "--bootstrap", self.kafka.bootstrap, "--input-topic", INPUT_TOPIC,
             "--output-topic", OUTPUT_TOPIC, *extra],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise KafkaWorkloadError(f"kafka_orders_io {command}: {done.stderr[-500:]}")
        return done.stdout

    def published(self) -> int:
        with contextlib.suppress(OSError, ValueError):
            lines = open(self.published_log).read().split()  # noqa: SIM115
            return int(lines[-1]) if lines else 0
        return 0

    def read_output(self) -> dict[str, list[str]]:
        return dict(json.loads(self._io("read", "--published", str(self.published()))))

    def committed_lines(self) -> list[str] | None:
        """The ids of the output topic's committed rows (read ``read_committed``): one row
        per published record, so an id seen twice was committed twice. None when the
        topic cannot be read now (a broker restarting)."""
        try:
            return list(self.read_output()["committed"])
        except (KafkaWorkloadError, subprocess.TimeoutExpired):
            return None

    def finish(self, timeout: float) -> Invariant | None:
        kill_group(self.standby_proc)
        self.standby_proc = None
        if self.feed is not None and self.feed.poll() is None:
            self.feed.send_signal(signal.SIGTERM)
            self.feed.wait(timeout)
        # The sink commits at completed checkpoints: wait until the rows of every published
        # record are committed — as long as the job catches up, a backlog left by the
        # faults takes what it takes; once nothing new is committed for ``timeout``, the
        # verdict names what is missing.
        deadline = time.monotonic() + timeout
        try:
            found = self.read_output()
            while (set(found["expected"]) - set(found["committed"])
                   and time.monotonic() < deadline):  # fmt: skip
                time.sleep(2.0)  # polling the output topic while checkpoints complete
                before, found = len(found["committed"]), self.read_output()
                if len(found["committed"]) > before:
                    deadline = time.monotonic() + timeout
        except (KafkaWorkloadError, subprocess.TimeoutExpired) as exc:
            return Invariant(EXACTLY_ONCE, False, f"cannot read {OUTPUT_TOPIC}: {exc}")
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # stops after the running epoch
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                kill_group(self.proc)
        return kafka_verdict(found["committed"], found["expected"], found["bad_keys"])

    def abort(self) -> None:
        super().abort()
        kill_group(self.feed)
        if hasattr(self, "kafka"):
            with contextlib.suppress(KafkaLaunchError):
                self.kafka.stop()


def kafka_verdict(committed: list[str], expected: list[str], bad_keys: list[str]) -> Invariant:
    """Exactly once on the output topic: each published id's row once, and every key's
    running count exactly 1..n (a row replayed with a recounted key shows there too)."""
    verdict = check_exactly_once(committed, expected)
    detail = f"{verdict.detail} ({OUTPUT_TOPIC}, read_committed)"
    if bad_keys:
        detail += f"; {len(bad_keys)} keys whose count is not 1..n: {bad_keys[:5]}"
    return Invariant(verdict.name, verdict.ok and not bad_keys, detail)
