"""Where a replica's durable state lives: ZooKeeper, or memory in the embedded mode.

The rest of the service asks this seam for a job's counter, store and the job registry
(fenced by the current term) and for read-only views used by followers and the CLI.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.counter import (
    CheckpointIDCounter,
    StandaloneCheckpointIDCounter,
    ZooKeeperCheckpointIDCounter,
)
from sparkpoint.ha import (
    ConnectionState,
    Leadership,
    ZooKeeperConnection,
    ZooKeeperLeadership,
    list_contenders,
    read_leader,
)
from sparkpoint.store import (
    CompletedCheckpointStore,
    JobRegistry,
    StandaloneCompletedCheckpointStore,
    StandaloneJobRegistry,
    ZooKeeperCompletedCheckpointStore,
    ZooKeeperJobRegistry,
)


@dataclass(frozen=True, slots=True)
class ListedIds:
    """The ids a job's store lists. ``undecodable``: znodes whose pointer could not be
    decoded (a newer format during a rolling upgrade, damage), by the id their name gives,
    None when the name gives none — then no id of the job can be called unlisted."""

    ids: frozenset[int]
    undecodable: dict[str, int | None] = field(default_factory=dict)
    #: The pointers that decoded.
    pointers: tuple[CheckpointPointer, ...] = ()

    @property
    def complete(self) -> bool:
        return None not in self.undecodable.values()


class Backend(Protocol):
    def connected(self) -> bool: ...

    def registry(self, leadership: Leadership | None) -> JobRegistry:
        """Fenced by ``leadership``; None: read-only."""
        ...

    def counter(self, job_id: str, leadership: Leadership) -> CheckpointIDCounter: ...

    def store(
        self, job_id: str, leadership: Leadership | None, max_retained: int
    ) -> CompletedCheckpointStore: ...

    def retained(self, job_id: str) -> list[CheckpointPointer]:
        """The job's retained checkpoints as durable now (a fresh read)."""
        ...

    def listed_ids(self, job_id: str) -> ListedIds:
        """Every checkpoint id the job's store lists now (a fresh read), decodable or not."""
        ...

    def leader_info(self) -> dict[str, Any] | None: ...

    def contenders(self) -> list[dict[str, Any]]: ...


def _fence(leadership: Leadership | None) -> Any:
    if leadership is None:
        return None
    if not isinstance(leadership, ZooKeeperLeadership):
        raise TypeError("a ZooKeeper backend needs a ZooKeeper leadership")
    return leadership.fence


class ZooKeeperBackend:
    def __init__(self, conn: ZooKeeperConnection) -> None:
        self.conn = conn

    def connected(self) -> bool:
        return self.conn.state is ConnectionState.CONNECTED

    def registry(self, leadership: Leadership | None) -> JobRegistry:
        return ZooKeeperJobRegistry(self.conn, _fence(leadership))

    def counter(self, job_id: str, leadership: Leadership) -> CheckpointIDCounter:
        return ZooKeeperCheckpointIDCounter(self.conn, job_id, _fence(leadership))

    def store(
        self, job_id: str, leadership: Leadership | None, max_retained: int
    ) -> CompletedCheckpointStore:
        return ZooKeeperCompletedCheckpointStore(
            self.conn, job_id, _fence(leadership), max_retained=max_retained
        )

    def retained(self, job_id: str) -> list[CheckpointPointer]:
        return ZooKeeperCompletedCheckpointStore(self.conn, job_id, None).recover()

    def listed_ids(self, job_id: str) -> ListedIds:
        store = ZooKeeperCompletedCheckpointStore(self.conn, job_id, None)
        pointers = store.recover()
        named = {i for i in store.unreadable_ids.values() if i is not None}
        return ListedIds(
            frozenset({p.checkpoint_id for p in pointers} | named),
            dict(store.unreadable_ids),
            tuple(pointers),
        )

    def leader_info(self) -> dict[str, Any] | None:
        info = read_leader(self.conn)
        if info is None:
            return None
        return {
            "instance_id": info.instance_id,
            "address": info.address,
            "term": info.epoch,
            "epoch": info.epoch,  # deprecated alias of "term", for one release
            "since_ms": info.since_ms,
            "renewals": info.renewals,
            "renewed_ms": info.renewed_ms,
        }

    def contenders(self) -> list[dict[str, Any]]:
        return [
            {
                "node": c.node,
                "instance_id": c.instance_id,
                "address": c.address,
                "session": f"{c.session:#x}",
            }
            for c in list_contenders(self.conn)
        ]


class EmbeddedBackend:
    """One process, no ZooKeeper: stores and counters outlive terms, not the process."""

    def __init__(self, address: str, instance_id: str) -> None:
        self._address = address
        self._instance_id = instance_id
        self._registry = StandaloneJobRegistry()
        self._counters: dict[str, StandaloneCheckpointIDCounter] = {}
        self._stores: dict[str, StandaloneCompletedCheckpointStore] = {}
        self._lock = threading.Lock()
        self.leadership: Leadership | None = None

    def connected(self) -> bool:
        return True

    def registry(self, leadership: Leadership | None) -> JobRegistry:
        return self._registry

    def counter(self, job_id: str, leadership: Leadership) -> CheckpointIDCounter:
        with self._lock:
            return self._counters.setdefault(job_id, StandaloneCheckpointIDCounter())

    def store(
        self, job_id: str, leadership: Leadership | None, max_retained: int
    ) -> CompletedCheckpointStore:
        with self._lock:
            return self._stores.setdefault(job_id, StandaloneCompletedCheckpointStore(max_retained))

    def retained(self, job_id: str) -> list[CheckpointPointer]:
        with self._lock:
            store = self._stores.get(job_id)
        return store.get_all() if store is not None else []

    def listed_ids(self, job_id: str) -> ListedIds:
        pointers = tuple(self.retained(job_id))
        return ListedIds(frozenset(p.checkpoint_id for p in pointers), pointers=pointers)

    def leader_info(self) -> dict[str, Any] | None:
        lead = self.leadership
        if lead is None:
            return None
        return {
            "instance_id": self._instance_id,
            "address": self._address,
            "term": lead.epoch,
            "epoch": lead.epoch,  # deprecated alias of "term", for one release
            "since_ms": int(lead.granted_at * 1000),
            "renewals": 0,
            "renewed_ms": int(lead.granted_at * 1000),
        }

    def contenders(self) -> list[dict[str, Any]]:
        return [{"node": "embedded", "instance_id": self._instance_id, "address": self._address}]
