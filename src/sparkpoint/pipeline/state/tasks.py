"""The tasks of the pipeline's state backend (backend.py), made in one place so
the driver's loop does not care where state lives: the epoch task, the snapshot task and
the load task of the in-memory backend (memory/tasks.py) or the on-disk one (rocksdb/tasks.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sparkpoint.checkpoint import IncrementalKeyedStateHandle, OperatorSubtaskState
from sparkpoint.pipeline.api.functions import KeyedProcessFunction
from sparkpoint.pipeline.runtime.keyed_epoch import NO_TIME, EpochTime
from sparkpoint.pipeline.state.backend import StateBackend
from sparkpoint.pipeline.state.memory.tasks import EpochTask, LoadTask, SnapshotTask
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.storage.location import CheckpointLocation

log = logging.getLogger(__name__)

Task = Callable[[int, Any], Any]


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
        self._uid = operator_uid
        self._p = parallelism
        self._m = max_parallelism
        self._place = None
        if backend.on_disk:
            from sparkpoint.pipeline.state.rocksdb.tasks import StorePlace

            self._place = StorePlace(
                job_id, process_tag, operator_uid, backend.settings, backend.local_dir
            )

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
        if self._place is None:
            return EpochTask(function, epoch, self._p, notices, snapshot_id, time, carried)
        from sparkpoint.pipeline.state.rocksdb.tasks import RocksEpochTask

        return RocksEpochTask(
            function, epoch, self._p, self._place, self._m, notices, snapshot_id, time, carried
        )

    def snapshot(self, location: CheckpointLocation) -> Task:
        """Yields ``(index, state or decline reason, store token or None)``. On the
        on-disk backend a checkpoint is incremental (see ``StateBackend.incremental``),
        a savepoint is full, in the canonical format."""
        if self._place is None:
            return SnapshotTask(location, self._uid, self._p, self._m)
        from sparkpoint.pipeline.state.rocksdb.tasks import RocksSnapshotTask

        base = None
        if self.backend.incremental and not location.is_savepoint:
            base = tuple(self._base.get(i) for i in range(self._p))
        return RocksSnapshotTask(location, self._uid, self._p, self._m, self._place, base)

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
        if self._place is None:
            return LoadTask(subtasks, self._m)
        from sparkpoint.pipeline.state.rocksdb.tasks import RocksLoadTask

        return RocksLoadTask(subtasks, self._m, self._place, keep)


def check_state_in_place(conf: Any, backend: StateBackend) -> None:
    """Warn when the on-disk backend runs on a Spark that may move a subtask's task away
    from its store (see session.STATE_IN_PLACE): such a task fails and is retried."""
    from sparkpoint.pipeline.runtime.spark_session import STATE_IN_PLACE

    if not backend.on_disk:
        return
    off = {k: v for k, v in STATE_IN_PLACE.items() if conf.get(k, None) != v}
    if off:
        log.warning(
            "state backend rocksdb: set %s so that tasks stay on the executor of their store",
            ", ".join(f"{k}={v}" for k, v in off.items()),
        )
