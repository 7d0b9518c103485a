"""What a driver run and the coordinator say to each other: one set of message types.

A driver hears notices — a trigger, a completion, an abort — numbered so they only rise
across leaders (``runs.session``); it answers with acknowledgements and declines. Beside
them, an active run's heartbeat reply carries :class:`RescaleTo` while a rescale request
stored with the job is pending (or just after a grant): a standing instruction read from
the job's record, not a numbered event, so it is repeated until the driver reports it
applied and survives a change of leader. The
REST API carries each notice as :meth:`to_dict` gives it and the client reads it back
with :func:`notice_from_dict`; the embedded channel hands the same objects over in
process. Nothing else in the project defines a notice the driver sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from sparkpoint.checkpoint import CheckpointKind, OperatorSubtaskState
from sparkpoint.recovery.plan import RestorePlan


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Snapshot at the next epoch boundary into ``directory`` (the checkpoint's or
    savepoint's directory); ``stop``: stop the job once this savepoint completes."""

    type: ClassVar[str] = "trigger"
    checkpoint_id: int
    kind: CheckpointKind
    directory: str
    stop: bool = False
    seq: int = field(default=0, compare=False)
    timestamp_ms: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {**_common(self), "directory": self.directory}


@dataclass(frozen=True, slots=True)
class CheckpointCompleted:
    """Durable in the store: sinks may commit, sources may acknowledge."""

    type: ClassVar[str] = "complete"
    checkpoint_id: int
    kind: CheckpointKind
    seq: int = field(default=0, compare=False)
    metadata_uri: str = field(default="", compare=False)
    timestamp_ms: int = field(default=0, compare=False)
    stop: bool = field(default=False, compare=False)  # the job stops with it

    def to_dict(self) -> dict[str, Any]:
        return {**_common(self), "metadata_uri": self.metadata_uri}


@dataclass(frozen=True, slots=True)
class CheckpointAborted:
    """Will never complete; ``reason`` says why."""

    type: ClassVar[str] = "abort"
    checkpoint_id: int
    reason: str
    seq: int = field(default=0, compare=False)
    kind: CheckpointKind = field(default=CheckpointKind.CHECKPOINT, compare=False)
    timestamp_ms: int = field(default=0, compare=False)
    stop: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {**_common(self), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class RescaleTo:
    """Run at ``parallelism``. ``request_id``: the pending request to report applied
    (``""`` after a grant with no request pending: the job's current parallelism, which a
    standby registered at another one adopts). Not numbered (``seq`` 0)."""

    type: ClassVar[str] = "rescale"
    parallelism: int
    request_id: str = ""
    seq: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "seq": self.seq,
            "parallelism": self.parallelism,
            "request_id": self.request_id,
        }


RunNotice = TriggerCheckpoint | CheckpointCompleted | CheckpointAborted | RescaleTo

#: One subtask's acknowledgement as a driver sends it: (operator uid, subtask, state).
Ack = tuple[str, int, OperatorSubtaskState]


class RestoreMode(Enum):
    """Who owns the files of the checkpoint a job restores from (docs/recovery.md,
    "Restore modes").

    ``NO_CLAIM``: the source's files stay the source's. The first checkpoint after the
    restore references none of them (it uploads everything it needs into the job's own
    ``shared/``); until it completes, the job still depends on the source's snapshot.
    The default of a restore from a given checkpoint or savepoint, and the only mode for
    one of another job (or of this job in another checkpoint directory).
    ``CLAIM``: the job owns the files and its checkpoints go on incrementally from them;
    only for the job's own checkpoints (a restart from its latest one claims it).
    """

    CLAIM = "claim"
    NO_CLAIM = "no-claim"

    @classmethod
    def of(cls, value: str | RestoreMode) -> RestoreMode:
        """The mode named ``value``; a clear error for any other name."""
        if isinstance(value, RestoreMode):
            return value
        for mode in cls:
            if mode.value == value:
                return mode
        names = ", ".join(m.value for m in cls)
        raise ValueError(f"restore mode {value!r} is unknown; use one of {names}")


@dataclass(frozen=True, slots=True)
class Restored:
    """What the job restored from, and the plan at the new parallelism. ``claimed``:
    the job owns the restored checkpoint's files (``RestoreMode.CLAIM``), so its next
    checkpoint may reference them; otherwise it references none of them."""

    checkpoint_id: int
    kind: CheckpointKind
    metadata_uri: str
    plan: RestorePlan
    claimed: bool = False


class RunSuperseded(Exception):
    """This driver run is no longer the job's current one: a newer run registered (a
    restarted driver, a standby that took over). Every call of the old run is refused
    and changes nothing; the driver must stop without committing anything more. The
    message names both runs."""


def notice_from_dict(data: dict[str, Any]) -> RunNotice:
    """The inverse of ``to_dict``; raises ValueError on an unknown type."""
    if data.get("type") == RescaleTo.type:
        return RescaleTo(int(data["parallelism"]), str(data.get("request_id") or ""))
    kind = CheckpointKind(data.get("kind") or "checkpoint")
    common = {"seq": int(data["seq"]), "timestamp_ms": int(data.get("timestamp_ms") or 0)}
    checkpoint_id = int(data["checkpoint_id"])
    match data.get("type"):
        case "trigger":
            return TriggerCheckpoint(checkpoint_id, kind, str(data.get("directory") or ""),
                                     bool(data.get("stop", False)), **common)  # fmt: skip
        case "complete":
            return CheckpointCompleted(checkpoint_id, kind,
                                       metadata_uri=str(data.get("metadata_uri") or ""),
                                       stop=bool(data.get("stop", False)),
                                       **common)  # fmt: skip
        case "abort":
            return CheckpointAborted(checkpoint_id, str(data.get("reason") or ""), kind=kind,
                                     stop=bool(data.get("stop", False)), **common)  # fmt: skip
    raise ValueError(f"unknown notice type {data.get('type')!r}")


def _common(notice: TriggerCheckpoint | CheckpointCompleted | CheckpointAborted) -> dict[str, Any]:
    return {
        "type": notice.type,
        "seq": notice.seq,
        "checkpoint_id": notice.checkpoint_id,
        "kind": notice.kind.value,
        "timestamp_ms": notice.timestamp_ms,
        "stop": notice.stop,
    }
