"""A coordinator inside the driver: the real ``CheckpointCoordinator`` with a standalone
counter and store, writing checkpoints to real storage. No service, no ZooKeeper — for
single-process runs, tests and benchmarks. A restarted driver restores from the newest
complete ``chk-<id>`` on disk (``_metadata`` is written last, so that one is whole).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from sparkpoint.checkpoint import JobGraph
from sparkpoint.coordinator import (
    AbortNotice,
    Acknowledgement,
    CheckpointCoordinator,
    CheckpointFinishedError,
    CheckpointingOptions,
    CompletionNotice,
    TriggerNotice,
    UnknownCheckpointError,
)
from sparkpoint.counter import StandaloneCheckpointIDCounter
from sparkpoint.pipeline.channel import (
    Ack,
    ChannelNotice,
    CheckpointAborted,
    CheckpointCompleted,
    Restored,
    TriggerCheckpoint,
)
from sparkpoint.recovery import plan_restore
from sparkpoint.recovery.loading import load_checkpoint
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import StandaloneCompletedCheckpointStore


class EmbeddedChannel:
    """``options``: checkpointing options by field or Flink key (``interval_ms`` …)."""

    def __init__(
        self,
        checkpoint_dir: str,
        *,
        savepoint_dir: str | None = None,
        inline_threshold: int | None = None,
        **options: Any,
    ) -> None:
        extra = {} if inline_threshold is None else {"inline_threshold": inline_threshold}
        self.storage = CheckpointStorage(checkpoint_dir, savepoint_dir=savepoint_dir, **extra)
        self.options = CheckpointingOptions.from_dict(options)
        self.coordinator: CheckpointCoordinator | None = None
        self._seq = 0
        self._stopping: set[int] = set()

    def _require(self) -> CheckpointCoordinator:
        if self.coordinator is None:
            raise RuntimeError("register the job first")
        return self.coordinator

    def register(self, graph: JobGraph) -> None:
        if self.coordinator is not None:
            return
        self.coordinator = CheckpointCoordinator(
            graph,
            self.options,
            counter=StandaloneCheckpointIDCounter(),
            store=StandaloneCompletedCheckpointStore(self.options.max_retained),
            storage=self.storage,
        )
        self.coordinator.start()

    def restore(self, graph: JobGraph, pointer: str | None = None) -> Restored | None:
        if pointer is None:
            if not self.storage.list_checkpoints(graph.job_id, completed_only=True):
                return None
            pointer = self.storage.job_directory(graph.job_id)
        loaded = load_checkpoint(self.storage, pointer)
        plan = plan_restore(loaded.checkpoint, graph)
        self._require().set_counter_above(loaded.checkpoint.checkpoint_id)
        return Restored(
            loaded.checkpoint.checkpoint_id, loaded.checkpoint.kind, loaded.metadata_uri, plan
        )

    def heartbeat(self) -> list[ChannelNotice]:
        coordinator = self._require()
        coordinator.tick()
        notices: list[ChannelNotice] = []
        for notice in coordinator.notifications_since(self._seq):
            self._seq = notice.seq
            if isinstance(notice, TriggerNotice):
                stop = notice.checkpoint_id in self._stopping
                notices.append(
                    TriggerCheckpoint(notice.checkpoint_id, notice.kind, notice.directory, stop)
                )
            elif isinstance(notice, CompletionNotice):
                notices.append(CheckpointCompleted(notice.checkpoint_id, notice.kind))
            elif isinstance(notice, AbortNotice):
                notices.append(CheckpointAborted(notice.checkpoint_id, notice.reason))
        return notices

    def acknowledge(self, checkpoint_id: int, acks: Sequence[Ack]) -> bool:
        try:
            self._require().acknowledge_all(
                checkpoint_id, [Acknowledgement(uid, i, state) for uid, i, state in acks]
            )
        except (UnknownCheckpointError, CheckpointFinishedError):
            return False
        return True

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        with suppress(UnknownCheckpointError, CheckpointFinishedError):
            self._require().decline(checkpoint_id, operator_uid, subtask, reason)

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        checkpoint_id = self._require().trigger_savepoint(target_dir, stop=stop)
        if stop:
            self._stopping.add(checkpoint_id)
        return checkpoint_id

    def trigger_checkpoint(self) -> int:
        return self._require().trigger_checkpoint()

    def close(self) -> None:
        if self.coordinator is not None:
            self.coordinator.close()
