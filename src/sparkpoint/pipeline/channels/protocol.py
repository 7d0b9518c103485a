"""The seam between the driver's epoch loop and the checkpoint coordinator.

The messages are those of ``sparkpoint.runs`` (one set for every channel). Two
implementations, both adapters over that package's driver-run lifecycle:
:class:`~sparkpoint.pipeline.channels.embedded.EmbeddedChannel` runs it, with a real
``CheckpointCoordinator``, inside the driver (one process, no service), and
:class:`~sparkpoint.pipeline.channels.remote.RemoteChannel` talks to the HA service through
``sparkpoint.client.CoordinatorClient`` and follows its leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sparkpoint.checkpoint import JobGraph
from sparkpoint.runs.messages import (
    Ack,
    CheckpointAborted,
    CheckpointCompleted,
    RescaleTo,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
    TriggerCheckpoint,
)

__all__ = [
    "Ack",
    "CheckpointAborted",
    "CheckpointChannel",
    "CheckpointCompleted",
    "RescaleTo",
    "RestoreMode",
    "Restored",
    "RunNotice",
    "RunSuperseded",
    "TriggerCheckpoint",
]


class CheckpointChannel(Protocol):
    """What the driver needs from a coordinator. Implementations keep the notification
    sequence themselves: ``heartbeat`` returns each notice once.

    Registering starts a driver run with a new id, which every later call carries; once
    another run registered, ``restore``, ``heartbeat``, ``acknowledge``, ``decline`` and
    the triggers raise :class:`RunSuperseded`."""

    def register(self, graph: JobGraph, *, standby: bool = False) -> str:
        """Register (or re-register after a restart) the job's graph; returns the id of
        the driver run this starts. ``standby``: as the job's warm standby run, which
        :meth:`wait_for_grant` then waits with (the run becomes the active one at once
        when the job has no active run)."""
        ...

    def wait_for_grant(self) -> list[RunNotice]:
        """A standby run: heartbeat until the coordinator grants it the job (the active
        run went silent or released it), and return the notices that came with the grant
        (the first trigger rides on it). Returns at once for an active run; raises
        :class:`RunSuperseded` when another standby replaced this one."""

    def release(self) -> None:
        """This run ends cleanly: the job's standby, if any, may take over at once. Best
        effort; never raises."""

    def restore(
        self, graph: JobGraph, pointer: str | None = None, mode: RestoreMode | None = None
    ) -> Restored | None:
        """Plan a restore at ``graph``'s parallelism from ``pointer`` (a savepoint or
        checkpoint directory) or, when None, the latest completed checkpoint; None when
        there is nothing to restore (a first start). ``mode`` None: claim the latest
        checkpoint, restore a pointer with no-claim (``Restored.claimed`` says which)."""
        ...

    def heartbeat(self) -> list[RunNotice]:
        """Say the driver is alive; get the notices that arrived since the last call."""
        ...

    def acknowledge(self, checkpoint_id: int, acks: Sequence[Ack]) -> bool:
        """Acknowledge subtasks of a checkpoint. False when the checkpoint is gone
        (aborted, expired, or lost with a coordinator failover): drop it and go on."""
        ...

    def decline(self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str) -> None:
        """A subtask could not snapshot; the checkpoint fails. A checkpoint already gone
        is not an error."""

    def trigger_checkpoint(self) -> int:
        """Ask for a checkpoint now (a bounded job's last one); returns its id."""
        ...

    def trigger_savepoint(self, target_dir: str | None = None, *, stop: bool = False) -> int:
        """Ask for a savepoint; its trigger comes through ``heartbeat`` like any other."""
        ...

    def rescaled(self, request_id: str, epoch: int, checkpoint_id: int | None) -> None:
        """This run applied the job's rescale request ``request_id`` (a :class:`RescaleTo`
        the heartbeat carried) after ``epoch``, from ``checkpoint_id``. Idempotent."""

    def close(self) -> None: ...
