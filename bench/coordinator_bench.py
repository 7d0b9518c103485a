"""Coordinator-side overhead per checkpoint: last acknowledgement received → durable in the
store, with 8, 128 and 1024 subtasks, as a ratio to the unavoidable work timed in the same
run (counter increment + `_metadata` write and rename + store add).

Not a test. Run it from the repository root:

    .venv/bin/python bench/coordinator_bench.py [--rounds 30] [--subtasks 8 128 1024]

Each round triggers a checkpoint, acknowledges all subtasks but one in a batch (not timed),
then times the call that delivers the last acknowledgement; that call finalises the
checkpoint and returns once the pointer is in the store. Inside the same call the
`_metadata` commit and the store add are timed too, so

    overhead = (last ack → durable) - (`_metadata` commit + store add, in that call)

is what the coordinator itself adds (validation, building the checkpoint, bookkeeping,
notices, statistics, metrics). The anchor, "unavoidable", is timed separately in the same
run on the same checkpoint content: a counter increment, a `_metadata` commit into a fresh
directory, and a store add — with no coordinator at all. Figures are medians over rounds.

The counter and store are the standalone (in-memory) ones; ``make_counter_and_store`` is
the one place to swap in the ZooKeeper implementations.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.checkpoint import (
    CheckpointPointer,
    CompletedCheckpoint,
    FileStateHandle,
    JobGraph,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSpec,
    OperatorSubtaskState,
)
from sparkpoint.coordinator import (
    Acknowledgement,
    CheckpointCoordinator,
    CheckpointingOptions,
    CheckpointStatus,
)
from sparkpoint.counter import CheckpointIDCounter, StandaloneCheckpointIDCounter
from sparkpoint.storage import CheckpointLocation, CheckpointStorage, CommittedMetadata
from sparkpoint.store import (
    CheckpointDiscarder,
    CompletedCheckpointStore,
    StandaloneCompletedCheckpointStore,
)


def make_counter_and_store() -> tuple[CheckpointIDCounter, CompletedCheckpointStore]:
    return StandaloneCheckpointIDCounter(), StandaloneCompletedCheckpointStore(max_retained=1)


class Stopwatch:
    """Accumulates the time spent inside the wrapped I/O during one finalisation."""

    def __init__(self) -> None:
        self.seconds = 0.0


class TimedLocation:
    """A real location whose `_metadata` commit is timed."""

    def __init__(self, inner: CheckpointLocation, watch: Stopwatch) -> None:
        self._inner, self._watch = inner, watch
        self.directory, self.metadata_uri = inner.directory, inner.metadata_uri

    def commit_metadata(self, checkpoint: CompletedCheckpoint) -> CommittedMetadata:
        start = time.perf_counter()
        try:
            return self._inner.commit_metadata(checkpoint)
        finally:
            self._watch.seconds += time.perf_counter() - start

    def discard(self) -> None:
        self._inner.discard()


class TimedStorage(CheckpointStorage):
    def __init__(self, root: str, watch: Stopwatch) -> None:
        super().__init__(root)
        self.watch = watch

    def init_checkpoint(self, job_id: str, checkpoint_id: int) -> CheckpointLocation:
        location = super().init_checkpoint(job_id, checkpoint_id)
        return TimedLocation(location, self.watch)  # type: ignore[return-value]


class TimedStore:
    """Delegates to a real store, timing the add."""

    def __init__(self, inner: CompletedCheckpointStore, watch: Stopwatch) -> None:
        self._inner, self._watch = inner, watch

    @property
    def max_retained(self) -> int:
        return self._inner.max_retained

    def recover(self) -> list[CheckpointPointer]:
        return self._inner.recover()

    def add_checkpoint_and_subsume_oldest(
        self, pointer: CheckpointPointer, discarder: CheckpointDiscarder | None = None
    ) -> list[CheckpointPointer]:
        start = time.perf_counter()
        try:
            return self._inner.add_checkpoint_and_subsume_oldest(pointer, discarder)
        finally:
            self._watch.seconds += time.perf_counter() - start

    def get_latest(self) -> CheckpointPointer | None:
        return self._inner.get_latest()

    def get_all(self) -> list[CheckpointPointer]:
        return self._inner.get_all()

    def shutdown(self, job_status, discarder=None):  # type: ignore[no-untyped-def]
        self._inner.shutdown(job_status, discarder)


def graph_for(subtasks: int) -> JobGraph:
    """A source, a keyed function and a sink sharing the subtasks (keyed gets the rest)."""
    small = max(subtasks // 4, 1)
    keyed = subtasks - 2 * small
    return JobGraph(
        f"bench-{subtasks}",
        (
            OperatorSpec("source", small, default_max_parallelism(small)),
            OperatorSpec("stateful", keyed, default_max_parallelism(keyed), keyed=True),
            OperatorSpec("sink", small, default_max_parallelism(small)),
        ),
    )


def default_max_parallelism(parallelism: int) -> int:
    """docs/architecture.md §6: the next power of two >= P + P/2, within 128..32768."""
    wanted = parallelism + parallelism // 2
    return min(max(128, 1 << (wanted - 1).bit_length()), 32768)


def subtask_state(op: OperatorSpec, subtask: int) -> OperatorSubtaskState:
    """What a real subtask acknowledges: a state file with one offset per key group."""
    if not op.keyed:
        return OperatorSubtaskState()
    m, p = op.max_parallelism, op.parallelism
    groups = KeyGroupRange(-(-subtask * m // p), -(-(subtask + 1) * m // p) - 1)
    size = 4096 * len(groups)
    offsets = tuple(4096 * i for i in range(len(groups)))
    stream = FileStateHandle(f"/state/{op.uid}-{subtask}-0", size)
    return OperatorSubtaskState(keyed=(KeyGroupsStateHandle(groups, offsets, stream),))


@dataclass
class Round:
    finalize: float
    io_in_call: float
    unavoidable: float
    per_ack: float


def one_round(
    coordinator: CheckpointCoordinator,
    acks: list[Acknowledgement],
    watch: Stopwatch,
    baseline: tuple[CheckpointIDCounter, CompletedCheckpointStore, CheckpointStorage],
) -> Round:
    cid = coordinator.trigger_checkpoint()
    coordinator.drain_notifications()
    start = time.perf_counter()
    coordinator.acknowledge_all(cid, acks[:-1])
    per_ack = (time.perf_counter() - start) / max(len(acks) - 1, 1)
    watch.seconds = 0.0
    start = time.perf_counter()
    result = coordinator.acknowledge_all(cid, acks[-1:])
    finalize = time.perf_counter() - start
    assert result.status is CheckpointStatus.COMPLETED, result
    coordinator.drain_notifications()
    return Round(finalize, watch.seconds, unavoidable_work(coordinator, cid, baseline), per_ack)


def unavoidable_work(
    coordinator: CheckpointCoordinator,
    cid: int,
    baseline: tuple[CheckpointIDCounter, CompletedCheckpointStore, CheckpointStorage],
) -> float:
    """Counter increment + `_metadata` commit + store add of the same content, no
    coordinator. The checkpoint value is taken from what the coordinator just wrote."""
    counter, store, storage = baseline
    completed = storage.read_metadata(coordinator.stats.history()[0].external_path or "")
    start = time.perf_counter()
    baseline_id = counter.get_and_increment()
    elapsed = time.perf_counter() - start
    location = storage.init_checkpoint(completed.job_id, baseline_id)
    content = CompletedCheckpoint(
        completed.job_id,
        baseline_id,
        completed.kind,
        completed.trigger_timestamp_ms,
        completed.completion_timestamp_ms,
        completed.operator_states,
    )
    start = time.perf_counter()
    committed = location.commit_metadata(content)
    pointer = CheckpointPointer(
        content.job_id,
        baseline_id,
        content.kind,
        content.trigger_timestamp_ms,
        content.completion_timestamp_ms,
        committed.uri,
        content.state_size,
        committed.checksum,
    )
    store.add_checkpoint_and_subsume_oldest(pointer, None)
    elapsed += time.perf_counter() - start
    del cid
    return elapsed


def bench(subtasks: int, rounds: int, root: Path) -> dict[str, float]:
    graph = graph_for(subtasks)
    watch = Stopwatch()
    counter, store = make_counter_and_store()
    storage = TimedStorage(str(root / "coordinator"), watch)
    coordinator = CheckpointCoordinator(
        graph,
        CheckpointingOptions(interval_ms=3_600_000, max_concurrent=1),
        counter=counter,
        store=TimedStore(store, watch),  # type: ignore[arg-type]
        storage=storage,
    )
    coordinator.start()
    acks = [
        Acknowledgement(op.uid, i, subtask_state(op, i))
        for op in graph.operators
        for i in range(op.parallelism)
    ]
    base_counter, base_store = make_counter_and_store()
    baseline = (base_counter, base_store, CheckpointStorage(str(root / "baseline")))
    one_round(coordinator, acks, watch, baseline)  # warm-up: imports, first directories
    results = [one_round(coordinator, acks, watch, baseline) for _ in range(rounds)]
    assert coordinator.close(60)
    med = statistics.median
    finalize = med(r.finalize for r in results)
    io = med(r.io_in_call for r in results)
    overhead = med(r.finalize - r.io_in_call for r in results)
    unavoidable = med(r.unavoidable for r in results)
    return {
        "subtasks": subtasks,
        "finalize_ms": finalize * 1e3,
        "io_in_call_ms": io * 1e3,
        "overhead_ms": overhead * 1e3,
        "unavoidable_ms": unavoidable * 1e3,
        "overhead_ratio": overhead / unavoidable,
        "finalize_ratio": finalize / unavoidable,
        "per_ack_us": med(r.per_ack for r in results) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--subtasks", type=int, nargs="+", default=[8, 128, 1024])
    args = parser.parse_args()
    header = (
        f"{'subtasks':>8} {'last ack→durable ms':>20} {'of it _metadata+store ms':>25} "
        f"{'overhead ms':>12} {'unavoidable ms':>15} {'overhead/unavoidable':>21} "
        f"{'total/unavoidable':>18} {'ack µs/subtask':>15}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="sparkpoint-bench-") as tmp:
        for n in args.subtasks:
            r = bench(n, args.rounds, Path(tmp) / str(n))
            print(
                f"{n:>8} {r['finalize_ms']:>20.3f} {r['io_in_call_ms']:>25.3f} "
                f"{r['overhead_ms']:>12.3f} {r['unavoidable_ms']:>15.3f} "
                f"{r['overhead_ratio']:>21.2f} {r['finalize_ratio']:>18.2f} "
                f"{r['per_ack_us']:>15.1f}"
            )


if __name__ == "__main__":
    main()
