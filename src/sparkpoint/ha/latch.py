"""A contender's place in the election queue: ephemeral sequential nodes in leader/latch."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable

from kazoo.exceptions import NoNodeError

from sparkpoint.ha import translate
from sparkpoint.ha.connection import ConnectionState, ZooKeeperConnection
from sparkpoint.ha.errors import ConflictError, HAError, PossiblyAppliedError
from sparkpoint.ha.leader_info import sequence_of

log = logging.getLogger(__name__)


class LatchQueue:
    """Joins the queue once per session, finds its node again after an in-doubt create
    (by a token in the node name, as kazoo's lock recipe does), removes nodes of its own
    left behind, and leaves the queue to go to the back."""

    def __init__(
        self, conn: ZooKeeperConnection, token: str, instance_id: str, address: str
    ) -> None:
        self._conn = conn
        self._prefix = f"c_{token}_"
        self._data = json.dumps({"instance_id": instance_id, "address": address}).encode()
        self._owners: dict[str, str] = {}
        self.node: str | None = None
        self._session: int | None = None

    @property
    def path(self) -> str:
        return self._conn.paths.latch

    def join(self) -> str:
        """Our node for the current session, created if this session has none yet."""
        session = self._conn.session_id
        if self.node is not None and self._session == session:
            return self.node
        try:
            with translate.writes("joining the election"):
                created = self._conn.client.create(
                    f"{self.path}/{self._prefix}", self._data,
                    ephemeral=True, sequence=True, makepath=True,
                )  # fmt: skip
            node = created.rsplit("/", 1)[1]
        except PossiblyAppliedError:
            with translate.reads("looking for our latch node"):
                children = self._conn.retry(self._conn.client.get_children, self.path)
            mine = [c for c in children if c.startswith(self._prefix)]
            if not mine:
                raise
            node = mine[0]
        self.node, self._session = node, session
        return node

    def queue(self) -> list[str] | None:
        """The queue in order, or None when it must be looked at again: our node is gone
        (new session) or stale nodes of ours were just removed."""
        node = self.join()
        with translate.reads("reading the election queue"):
            children = sorted(
                self._conn.retry(self._conn.client.get_children, self.path), key=sequence_of
            )
        if node not in children:
            self.node = None
            return None
        stale = [c for c in children if c.startswith(self._prefix) and c != node]
        if stale:
            # Left behind when we stepped down while disconnected. Waiting behind our own
            # old node would deadlock the queue, so remove them and look again.
            for old in stale:
                with contextlib.suppress(ConflictError), translate.writes("removing a stale node"):
                    self._conn.client.delete(f"{self.path}/{old}")
            return None
        return children

    def watch_predecessor(self, children: list[str], on_gone: Callable[..., None]) -> None:
        """Call ``on_gone`` when the node just ahead of ours goes away (no herd effect)."""
        assert self.node is not None
        position = children.index(self.node)
        predecessor = f"{self.path}/{children[position - 1]}"
        with translate.reads("watching the election queue"):
            if self._conn.client.exists(predecessor, watch=on_gone) is None:
                on_gone()  # gone already: look again at once

    def owner(self, node: str) -> str | None:
        """The instance id that queued ``node`` (latch nodes never change, so cached)."""
        if node not in self._owners:
            try:
                with translate.reads("reading a latch node"):
                    raw, _ = self._conn.retry(self._conn.client.get, f"{self.path}/{node}")
                self._owners[node] = json.loads(raw.decode())["instance_id"]
            except (NoNodeError, ValueError, KeyError):
                return None
        return self._owners[node]

    def leave(self, who: str) -> None:
        """Delete our node so we queue again at the back (and a successor moves up)."""
        node, self.node = self.node, None
        if node is None or self._conn.state is not ConnectionState.CONNECTED:
            return  # a node left behind is removed by queue() later
        try:
            with translate.writes("leaving the election queue"):
                self._conn.client.delete(f"{self.path}/{node}")
        except (HAError, NoNodeError) as exc:
            log.info("%s: latch node %s not deleted: %s", who, node, exc)
