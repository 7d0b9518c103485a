"""A coordinator inside the driver: the real ``CheckpointCoordinator`` with a standalone
counter and store, writing checkpoints to real storage. No service, no ZooKeeper — for
single-process runs, tests and benchmarks. A restarted driver restores from the newest
complete ``chk-<id>`` on disk (``_metadata`` is written last, so that one is whole).

Driver runs behave as with the service: each registration starts a run with a new id, and
a run that is no longer current is refused (:class:`~sparkpoint.pipeline.channel.RunSuperseded`)
and changes nothing. :meth:`EmbeddedChannel.another_run` gives a second driver in the same
process its own channel to the same coordinator.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from sparkpoint.checkpoint import JobGraph
from sparkpoint.coordinator import (
    AbortNotice,
    Acknowledgement,
    CheckpointCoordinator,
    CheckpointFinishedError,
    CheckpointingOptions,
    CompletionNotice,
    SupersededRunError,
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
    RunSuperseded,
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
        self.run_id: str | None = None
        self._owner = True
        self._seq = 0
        self._stopping: set[int] = set()

    def another_run(self) -> EmbeddedChannel:
        """A channel for another driver run of the same job, on this channel's coordinator
        (register this one first); registering it supersedes this channel's run."""
        other = EmbeddedChannel.__new__(EmbeddedChannel)
        other.storage, other.options = self.storage, self.options
        other.coordinator = self._require()
        other.run_id = None
        other._owner = False
        other._seq = other.coordinator.outbox.last_seq
        other._stopping = self._stopping
        return other

    def _require(self) -> CheckpointCoordinator:
        if self.coordinator is None:
            raise RuntimeError("register the job first")
        return self.coordinator

    def _current(self) -> CheckpointCoordinator:
        """The coordinator, if this channel's run is still the current one."""
        coordinator = self._require()
        if self.run_id is None:
            raise RuntimeError("register the job first")
        with self._as_run():
            coordinator.check_run(self.run_id)
        return coordinator

    @contextmanager
    def _as_run(self) -> Iterator[None]:
        try:
            yield
        except SupersededRunError as exc:
            raise RunSuperseded(str(exc)) from exc

    def register(self, graph: JobGraph, *, standby: bool = False) -> str:
        if standby:
            raise ValueError(
                "a standby driver needs the coordinator service (--coordinator): an embedded "
                "coordinator lives and dies with its one driver"
            )
        self.run_id = uuid.uuid4().hex
        if self.coordinator is None:
            self.storage.check_writable(graph.job_id)  # refused now, not at the 1st checkpoint
            self.coordinator = CheckpointCoordinator(
                graph,
                self.options,
                counter=StandaloneCheckpointIDCounter(),
                store=StandaloneCompletedCheckpointStore(self.options.max_retained),
                storage=self.storage,
                run_id=self.run_id,
            )
            self.coordinator.start()
        else:
            self.coordinator.begin_run(self.run_id)
            # Notices from before this run (triggers of an earlier run) are not ours.
            self._seq = self.coordinator.outbox.last_seq
        return self.run_id

    def wait_for_grant(self) -> list[ChannelNotice]:
        """Embedded runs are never standbys."""
        return []

    def release(self) -> None:
        """Nothing to hand over: no standby shares an embedded coordinator's job."""

    def restore(self, graph: JobGraph, pointer: str | None = None) -> Restored | None:
        self._current().await_finalizations()
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
        coordinator = self._current()
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
        coordinator, run = self._require(), self.run_id
        try:
            with self._as_run():
                coordinator.acknowledge_all(
                    checkpoint_id,
                    [Acknowledgement(uid, i, state) for uid, i, state in acks],
                    run_id=run,
                )
        except (UnknownCheckpointError, CheckpointFinishedError):
            return False
        return True

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        coordinator, run = self._require(), self.run_id
        with suppress(UnknownCheckpointError, CheckpointFinishedError), self._as_run():
            coordinator.decline(checkpoint_id, operator_uid, subtask, reason, run_id=run)

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        checkpoint_id = self._current().trigger_savepoint(target_dir, stop=stop)
        if stop:
            self._stopping.add(checkpoint_id)
        return checkpoint_id

    def trigger_checkpoint(self) -> int:
        return self._current().trigger_checkpoint()

    def close(self) -> None:
        if self.coordinator is not None and self._owner:
            self.coordinator.close()
