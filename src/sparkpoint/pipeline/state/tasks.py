"""The tasks of the pipeline's state backend (backend.py), made in one place so the
driver's loop does not care where state lives: each backend makes its epoch, snapshot and
load tasks (:class:`BackendTasks`: memory/tasks.py, rocksdb/tasks.py), chosen once from the
setting; this module keeps what is the same for both, the base of the next incremental
checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from sparkpoint.checkpoint import IncrementalKeyedStateHandle, OperatorSubtaskState
from sparkpoint.pipeline.api.functions import KeyedProcessFunction
from sparkpoint.pipeline.runtime.keyed_epoch import NO_TIME, EpochParameters, EpochTime
from sparkpoint.pipeline.state.backend import StateBackend
from sparkpoint.pipeline.state.memory.tasks import MemoryTasks
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.storage.location import CheckpointLocation

log = logging.getLogger(__name__)

Task = Callable[[int, Any], Any]


class BackendTasks(Protocol):
    """What a state backend makes for one keyed operator: per-partition tasks that Spark
    ships to the executors (plain picklable objects)."""

    def epoch(self, parameters: EpochParameters) -> Task:
        """Runs the keyed function over one partition's state and records."""
        ...

    def snapshot(
        self,
        location: CheckpointLocation,
        base: tuple[IncrementalKeyedStateHandle | None, ...] | None,
    ) -> Task:
        """Writes a subtask's state: ``(index, state or decline reason, store token)``;
        ``base``: per subtask, the last completed checkpoint's files to build on."""
        ...

    def load(self, subtasks: tuple[SubtaskRestore, ...], keep: tuple[Any, ...]) -> Task:
        """Reads subtasks' state back (after a snapshot, or on restore)."""
        ...

    def close(self) -> None:
        """The driver is done: end what the tasks left running for the next epoch."""
        ...


class StateTasks:
    """>>> tasks = StateTasks(StateBackend("rocksdb"), "clicks", "run1", "process", 4, 128)"""

    def __init__(
        self,
        backend: StateBackend,
        job_id: str,
        process_tag: str,
        operator_uid: str,
        parallelism: int,
        max_parallelism: int,
    ) -> None:
        self.backend = backend
        #: Per subtask, the incremental handle of the last completed checkpoint: the
        #: base of the next one (never a pending checkpoint's).
        self._base: dict[int, IncrementalKeyedStateHandle] = {}
        self._acknowledged: dict[int, dict[int, IncrementalKeyedStateHandle]] = {}
        self._p = parallelism
        self._tasks: BackendTasks = MemoryTasks(operator_uid, parallelism, max_parallelism)
        if backend.on_disk:  # its module loads the store's library: only when asked for
            from sparkpoint.pipeline.state.rocksdb.tasks import RocksDBTasks, StorePlace

            place = StorePlace(
                job_id, process_tag, operator_uid, backend.settings, backend.local_dir
            )
            self._tasks = RocksDBTasks(operator_uid, parallelism, max_parallelism, place)

    def epoch(
        self,
        function: KeyedProcessFunction,
        epoch: int,
        notices: tuple[tuple[str, int], ...] = (),
        snapshot_id: int | None = None,
        time: EpochTime = NO_TIME,
        *,
        carried: bool = False,
    ) -> Task:
        """``carried``: a later keyed stage, whose records carry their timestamps."""
        return self._tasks.epoch(
            EpochParameters(function, epoch, self._p, notices, snapshot_id, time, carried)
        )

    def snapshot(self, location: CheckpointLocation) -> Task:
        """Yields ``(index, state or decline reason, store token or None)``. On the
        on-disk backend a checkpoint is incremental (see ``StateBackend.incremental``),
        a savepoint is full, in the canonical format."""
        base = None
        if self.backend.incremental and not location.is_savepoint:
            base = tuple(self._base.get(i) for i in range(self._p))
        return self._tasks.snapshot(location, base)

    def acknowledged(self, checkpoint_id: int, states: dict[int, OperatorSubtaskState]) -> None:
        """Remember a checkpoint's incremental handles until it completes or is gone."""
        handles = {
            i: s.keyed[0]
            for i, s in states.items()
            if len(s.keyed) == 1 and isinstance(s.keyed[0], IncrementalKeyedStateHandle)
        }
        if handles:
            self._acknowledged[checkpoint_id] = handles

    def completed(self, checkpoint_id: int) -> None:
        """A checkpoint completed: it is the base of the next one."""
        if checkpoint_id in self._acknowledged:
            self._base = self._acknowledged.pop(checkpoint_id)
        for older in [c for c in self._acknowledged if c < checkpoint_id]:
            del self._acknowledged[older]

    def restored(self, subtasks: tuple[SubtaskRestore, ...], *, claimed: bool) -> None:
        """Restored stores that keep their files are the base of the first checkpoint —
        when the job owns those files (``claimed``). Otherwise (no-claim) the first
        checkpoint has no base: it uploads every file into the job's own ``shared/`` and
        references none of the source's, whose collector counts only its own references."""
        from sparkpoint.pipeline.state.rocksdb.files import is_whole

        self._base = {
            s.index: s.keyed[0]  # type: ignore[misc]
            for s in subtasks
            if claimed and len(s.keyed) == 1 and is_whole(s.keyed[0], s.key_group_range)
        }

    def load(self, subtasks: tuple[SubtaskRestore, ...], keep: tuple[Any, ...] = ()) -> Task:
        """``keep``: per subtask, the store token a snapshot was just taken from; the
        on-disk backend keeps a store still at it instead of building it again."""
        return self._tasks.load(subtasks, keep)

    def close(self) -> None:
        """The driver is done (rocksdb: this host's store server stops)."""
        self._tasks.close()


def check_state_in_place(conf: Any, backend: StateBackend) -> None:
    """Warn when the on-disk backend runs on a Spark that may move a subtask's task away
    from its store (see runtime/spark_session.STATE_IN_PLACE): such a task fails and is retried."""
    from sparkpoint.pipeline.runtime.spark_session import STATE_IN_PLACE

    if not backend.on_disk:
        return
    off = {k: v for k, v in STATE_IN_PLACE.items() if conf.get(k, None) != v}
    if off:
        log.warning(
            "state backend rocksdb: set %s so that tasks stay on the executor of their store",
            ", ".join(f"{k}={v}" for k, v in off.items()),
        )
