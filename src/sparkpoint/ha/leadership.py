"""A term of leadership and the seams between an election and whoever uses it."""

from __future__ import annotations

import enum
import threading
import time
from typing import Protocol

from sparkpoint.ha.clock import lease_clock
from sparkpoint.ha.errors import FencedError, NotConnectedError


class ContenderState(enum.StrEnum):
    """The contender state machine (docs/ha.md)."""

    FOLLOWER = "follower"  # in the election, not leading
    LEADER = "leader"  # holds epoch E and may act
    SUSPENDED = "suspended"  # leader whose connection dropped: holds E, must not act
    FENCED = "fenced"  # found the epoch moved on: stepping down, will contend again
    STOPPED = "stopped"  # left the election


class Leadership:
    """One term: the epoch E won, and whether this replica may act on it *right now*.

    Users check :meth:`can_act` before every decision that matters (triggering or
    completing a checkpoint); their writes are fenced anyway, so a stale answer can only
    cost a refused write, never a wrong one.
    """

    def __init__(self, epoch: int, instance_id: str) -> None:
        self.epoch = epoch
        self.instance_id = instance_id
        self.granted_at = time.time()
        self.revoked = threading.Event()
        self.revoke_reason: str | None = None
        self._suspended = threading.Event()
        self._lease_deadline: float | None = None  # lease_clock(); None = no lease (sessions only)

    def can_act(self) -> bool:
        return (
            not self.revoked.is_set()
            and not self._suspended.is_set()
            and (self._lease_deadline is None or lease_clock() < self._lease_deadline)
        )

    def lease_remaining(self) -> float | None:
        """Seconds this leader may still act without another renewal (None: no lease)."""
        if self._lease_deadline is None:
            return None
        return max(0.0, self._lease_deadline - lease_clock())

    def _set_lease_deadline(self, deadline: float) -> None:
        self._lease_deadline = deadline

    def ensure_can_act(self) -> None:
        """Raise unless this leadership may act now."""
        if self.revoked.is_set():
            raise FencedError(
                f"leadership of term {self.epoch} was revoked: {self.revoke_reason}",
                expected_epoch=self.epoch,
                current_epoch=None,
            )
        if self._suspended.is_set():
            raise NotConnectedError(f"leadership of term {self.epoch} is suspended")
        if self._lease_deadline is not None and lease_clock() >= self._lease_deadline:
            raise NotConnectedError(f"the lease of term {self.epoch} lapsed without renewal")

    @property
    def is_suspended(self) -> bool:
        return self._suspended.is_set()

    def _suspend(self) -> None:
        self._suspended.set()

    def _resume(self) -> None:
        self._suspended.clear()

    def _revoke(self, reason: str) -> None:
        if not self.revoked.is_set():
            self.revoke_reason = reason
            self.revoked.set()

    def __repr__(self) -> str:
        state = (
            "revoked" if self.revoked.is_set() else "suspended" if self.is_suspended else "active"
        )
        return f"Leadership(term={self.epoch}, instance={self.instance_id}, {state})"


class LeadershipListener(Protocol):
    """Told when this replica gains or loses leadership. Calls come from the election's
    own thread, one at a time, grant before revoke; they should return promptly."""

    def leadership_granted(self, leadership: Leadership) -> None: ...

    def leadership_revoked(self, leadership: Leadership, reason: str) -> None: ...


class NoListener:
    """The listener of an election nobody listens to."""

    def leadership_granted(self, leadership: Leadership) -> None:
        """Nobody to tell."""

    def leadership_revoked(self, leadership: Leadership, reason: str) -> None:
        """Nobody to tell."""


class LeaderElection(Protocol):
    """ZooKeeper-backed or embedded; the service sees only this."""

    @property
    def state(self) -> ContenderState: ...

    @property
    def leadership(self) -> Leadership | None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def step_down(self, reason: str) -> None: ...
