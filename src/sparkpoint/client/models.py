"""The client's view of replies: small frozen values built from the JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkpoint.recovery.plan import RestorePlan
from sparkpoint.runs.messages import RescaleTo, RunNotice, notice_from_dict


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``role``: the caller's, "active" or "standby" (a standby reading "active" was
    granted the job); ``notification_seq``: the job's last notification seq; ``rescale``:
    an active run's rescale instruction (``runs.rescales``)."""

    leader_term: int
    job_status: str
    notifications: list[RunNotice]
    role: str = "active"
    notification_seq: int = 0
    rescale: RescaleTo | None = None

    @property
    def last_seq(self) -> int | None:
        return self.notifications[-1].seq if self.notifications else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Heartbeat:
        rescale = data.get("rescale")
        return cls(
            # "leader_epoch": its old name, still sent (and read) for one release
            leader_term=int(data.get("leader_term", data.get("leader_epoch", 0))),
            job_status=str(data["job_status"]),
            notifications=[notice_from_dict(n) for n in data.get("notifications", [])],
            role=str(data.get("role", "active")),
            notification_seq=int(data.get("notification_seq", 0)),
            rescale=RescaleTo(int(rescale["parallelism"]), str(rescale.get("request_id") or ""))
            if rescale
            else None,
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
