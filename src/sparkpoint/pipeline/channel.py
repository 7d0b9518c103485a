"""The seam between the driver's epoch loop and the checkpoint coordinator.

Two implementations: :class:`~sparkpoint.pipeline.embedded.EmbeddedChannel` runs a real
``CheckpointCoordinator`` inside the driver (one process, no service), and
:class:`~sparkpoint.pipeline.remote.RemoteChannel` talks to the HA service through
``sparkpoint.client.CoordinatorClient`` and follows its leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sparkpoint.checkpoint import CheckpointKind, JobGraph, OperatorSubtaskState
from sparkpoint.recovery import RestorePlan


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Snapshot at the next epoch boundary into ``directory`` (the checkpoint's or
    savepoint's directory); ``stop``: stop the job once this savepoint completes."""

    checkpoint_id: int
    kind: CheckpointKind
    directory: str
    stop: bool = False


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    checkpoint_id: int
    kind: CheckpointKind


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    checkpoint_id: int
    reason: str


ChannelNotice = TriggerCheckpoint | CheckpointCompleted | CheckpointAborted


@dataclass(frozen=True, slots=True)
class Restored:
    """What the job restored from, and the plan at the new parallelism."""

    checkpoint_id: int
    kind: CheckpointKind
    metadata_uri: str
    plan: RestorePlan


Ack = tuple[str, int, OperatorSubtaskState]


class RunSuperseded(Exception):
    """This driver run is no longer the job's current one: a newer run registered (a
    restarted driver, a standby that took over). Every call of the old run is refused
    and changes nothing; the driver must stop without committing anything more. The
    message names both runs."""


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

    def wait_for_grant(self) -> list[ChannelNotice]:
        """A standby run: heartbeat until the coordinator grants it the job (the active
        run went silent or released it), and return the notices that came with the grant
        (the first trigger rides on it). Returns at once for an active run; raises
        :class:`RunSuperseded` when another standby replaced this one."""

    def release(self) -> None:
        """This run ends cleanly: the job's standby, if any, may take over at once. Best
        effort; never raises."""

    def restore(self, graph: JobGraph, pointer: str | None = None) -> Restored | None:
        """Plan a restore at ``graph``'s parallelism from ``pointer`` (a savepoint or
        checkpoint directory) or, when None, the latest completed checkpoint; None when
        there is nothing to restore (a first start)."""
        ...

    def heartbeat(self) -> list[ChannelNotice]:
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

    def close(self) -> None: ...
