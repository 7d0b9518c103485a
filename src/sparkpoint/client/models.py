"""The client's view of replies: small frozen values built from the JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkpoint.recovery.plan import RestorePlan


@dataclass(frozen=True, slots=True)
class Notification:
    """One trigger, completion or abort notice of a heartbeat reply.

    ``directory`` (triggers): where the subtasks write this checkpoint's state files.
    ``metadata_uri`` (completions): the committed `_metadata`.
    """

    seq: int
    type: str
    checkpoint_id: int
    kind: str
    timestamp_ms: int
    reason: str | None = None
    stop: bool = False
    directory: str | None = None
    metadata_uri: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Notification:
        return cls(
            seq=int(data["seq"]),
            type=str(data["type"]),
            checkpoint_id=int(data["checkpoint_id"]),
            kind=str(data.get("kind", "checkpoint")),
            timestamp_ms=int(data.get("timestamp_ms", 0)),
            reason=data.get("reason"),
            stop=bool(data.get("stop", False)),
            directory=data.get("directory"),
            metadata_uri=data.get("metadata_uri"),
        )


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``role``: the caller's, "active" or "standby" (a standby reading "active" was
    granted the job); ``notification_seq``: the job's last notification seq."""

    leader_term: int
    job_status: str
    notifications: list[Notification]
    role: str = "active"
    notification_seq: int = 0

    @property
    def last_seq(self) -> int | None:
        return self.notifications[-1].seq if self.notifications else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Heartbeat:
        return cls(
            # "leader_epoch": its old name, still sent (and read) for one release
            leader_term=int(data.get("leader_term", data.get("leader_epoch", 0))),
            job_status=str(data["job_status"]),
            notifications=[Notification.from_dict(n) for n in data.get("notifications", [])],
            role=str(data.get("role", "active")),
            notification_seq=int(data.get("notification_seq", 0)),
        )


@dataclass(frozen=True, slots=True)
class RestoreResponse:
    """``restored``: which checkpoint was chosen (None: nothing to restore, a first start)."""

    restored: dict[str, Any] | None
    plan: RestorePlan | None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestoreResponse:
        plan = data.get("plan")
        return cls(
            restored=data.get("restored"),
            plan=RestorePlan.from_dict(plan) if plan is not None else None,
        )
