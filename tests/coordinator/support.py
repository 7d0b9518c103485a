"""Shared pieces of the coordinator tests: a manual clock, graphs, states, and a counter and
a store that fail the way ZooKeeper's do (real subclasses, not mocks)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from sparkpoint.checkpoint import (
    CheckpointPointer,
    InlineStateHandle,
    JobGraph,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSpec,
    OperatorSubtaskState,
)
from sparkpoint.coordinator import CheckpointCoordinator, CheckpointingOptions
from sparkpoint.counter import StandaloneCheckpointIDCounter
from sparkpoint.ha.errors import HAError
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import StandaloneCompletedCheckpointStore

_job_ids = itertools.count(1)


class ManualClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


class RecordingStorage(CheckpointStorage):
    """The real checkpoint storage, remembering which checkpoints it was asked to discard."""

    def __init__(self, checkpoint_dir: Path, *, savepoint_dir: Path | None = None) -> None:
        super().__init__(
            str(checkpoint_dir), savepoint_dir=str(savepoint_dir) if savepoint_dir else None
        )
        self.discarded: list[int] = []

    def discard(self, pointer: CheckpointPointer) -> None:
        self.discarded.append(pointer.checkpoint_id)
        super().discard(pointer)


def metadata_path(pointer: CheckpointPointer) -> Path:
    """The local file a pointer's `_metadata` URI names."""
    return Path(urlparse(pointer.metadata_uri).path)


class FailingCounter(StandaloneCheckpointIDCounter):
    """A standalone counter that raises ``fail_with`` (e.g. FencedError) while it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_with: HAError | None = None

    def get_and_increment(self) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        return super().get_and_increment()


class FailingStore(StandaloneCompletedCheckpointStore):
    """A standalone store whose add raises ``fail_with``; with ``apply_first`` the add is
    applied before raising (a write whose connection dropped after it landed)."""

    def __init__(self, max_retained: int = 1) -> None:
        super().__init__(max_retained)
        self.fail_with: HAError | None = None
        self.apply_first = False

    def add_checkpoint_and_subsume_oldest(self, pointer, discarder=None):  # type: ignore[no-untyped-def]
        if self.fail_with is not None and not self.apply_first:
            raise self.fail_with
        subsumed = super().add_checkpoint_and_subsume_oldest(pointer, discarder)
        if self.fail_with is not None:
            raise self.fail_with
        return subsumed


def make_graph(*parallelisms: int, job_id: str | None = None) -> JobGraph:
    """Operators op0, op1, … with the given parallelism, each acknowledging."""
    job = job_id or f"job-{next(_job_ids)}"
    ops = tuple(
        OperatorSpec(uid=f"op{i}", parallelism=p, max_parallelism=128, keyed=True)
        for i, p in enumerate(parallelisms)
    )
    return JobGraph(job, ops)


def keyed_state(subtask: int, parallelism: int, payload: bytes = b"state") -> OperatorSubtaskState:
    """Keyed state of ``subtask`` covering its key groups of max parallelism 128."""
    start = -(-subtask * 128 // parallelism)
    end = -(-(subtask + 1) * 128 // parallelism) - 1
    groups = KeyGroupRange(start, end)
    handle = KeyGroupsStateHandle(
        groups, tuple(0 for _ in groups), InlineStateHandle(f"s{subtask}", payload)
    )
    return OperatorSubtaskState(keyed=(handle,))


@dataclass
class Harness:
    coordinator: CheckpointCoordinator
    clock: ManualClock
    counter: FailingCounter
    store: FailingStore
    storage: RecordingStorage
    graph: JobGraph
    options: CheckpointingOptions
    root: Path

    def ack_all(self, checkpoint_id: int, *, skip: int = 0):  # type: ignore[no-untyped-def]
        """Acknowledge every subtask but the last ``skip`` ones; return the last result."""
        keys = sorted(self.graph.acknowledging_subtasks)
        result = None
        for uid, i in keys[: len(keys) - skip]:
            p = self.graph.operator(uid).parallelism
            result = self.coordinator.acknowledge(checkpoint_id, uid, i, keyed_state(i, p))
        return result

    def checkpoint_dirs(self) -> list[str]:
        job_dir = self.root / "checkpoints" / self.graph.job_id
        if not job_dir.is_dir():
            return []
        return sorted(p.name for p in job_dir.iterdir() if p.name.startswith("chk-"))

    def trigger_next(self) -> int:
        """Advance the clock one interval and tick; return the triggered id."""
        self.clock.advance(self.options.interval_ms)
        report = self.coordinator.tick()
        assert report.triggered is not None, report
        return report.triggered


def make_harness(
    root: Path,
    *parallelisms: int,
    start: bool = True,
    storage: RecordingStorage | None = None,
    **options: int,
) -> Harness:
    clock = ManualClock()
    graph = make_graph(*(parallelisms or (2,)))
    opts = CheckpointingOptions(**{"interval_ms": 1000, "timeout_ms": 10_000, **options})
    counter = FailingCounter()
    store = FailingStore(opts.max_retained)
    if storage is None:
        storage = RecordingStorage(root / "checkpoints", savepoint_dir=root / "savepoints")
    coordinator = CheckpointCoordinator(
        graph, opts, counter=counter, store=store, storage=storage, clock=clock
    )
    if start:
        coordinator.start()
    return Harness(coordinator, clock, counter, store, storage, graph, opts, root)
