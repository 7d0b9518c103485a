"""The embedded variant: one process, no ZooKeeper, always the leader."""

from __future__ import annotations

from sparkpoint.ha.leadership import ContenderState, Leadership, LeadershipListener


class EmbeddedLeaderElection:
    """Grants leadership at once on start; ``step_down`` starts a new term (epoch + 1)."""

    def __init__(self, instance_id: str = "embedded", listener: LeadershipListener | None = None):
        self.instance_id = instance_id
        self._listener = listener
        self._leadership: Leadership | None = None
        self._epoch = 0
        self._state = ContenderState.STOPPED

    @property
    def state(self) -> ContenderState:
        return self._state

    @property
    def leadership(self) -> Leadership | None:
        return self._leadership

    def start(self) -> None:
        self._grant()

    def stop(self) -> None:
        self._revoke("stopping")
        self._state = ContenderState.STOPPED

    def step_down(self, reason: str) -> None:
        self._revoke(reason)
        self._grant()

    def _grant(self) -> None:
        self._epoch += 1
        self._leadership = Leadership(self._epoch, self.instance_id)
        self._state = ContenderState.LEADER
        if self._listener is not None:
            self._listener.leadership_granted(self._leadership)

    def _revoke(self, reason: str) -> None:
        lead, self._leadership = self._leadership, None
        if lead is None:
            return
        lead._revoke(reason)
        self._state = ContenderState.FOLLOWER
        if self._listener is not None:
            self._listener.leadership_revoked(lead, reason)
