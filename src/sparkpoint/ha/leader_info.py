"""leader/info: who leads, at which address, since when — and reading it back."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from sparkpoint.ha import translate
from sparkpoint.ha.connection import ZooKeeperConnection
from sparkpoint.ha.errors import ConflictError
from sparkpoint.ha.fencing import Fence, Op


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """What the leader publishes; ``renewals`` counts its fenced lease renewals."""

    instance_id: str
    address: str
    epoch: int
    since_ms: int
    renewals: int = 0
    renewed_ms: int = 0

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> LeaderInfo | None:
        try:
            data: dict[str, Any] = json.loads(raw.decode())
            return cls(**data)
        except (ValueError, TypeError):
            return None


@dataclass(frozen=True, slots=True)
class ContenderInfo:
    node: str
    instance_id: str
    address: str
    #: The ZooKeeper session that holds the node (a restarted process has a new one).
    session: int = 0


def sequence_of(node: str) -> int:
    """ZooKeeper's 10-digit suffix of a sequential node."""
    return int(node[-10:])


def read_leader(conn: ZooKeeperConnection) -> LeaderInfo | None:
    """The current leader, or None if no leader holds the current epoch."""
    with translate.reads("reading leader info"):
        try:
            raw, _ = conn.retry(conn.client.get, conn.paths.leader_info)
        except NoNodeError:
            return None
        epoch_stat = conn.retry(conn.client.exists, conn.paths.epoch)
    info = LeaderInfo.from_bytes(raw)
    if info is None or epoch_stat is None or info.epoch != epoch_stat.version:
        return None  # written by a leader that has since been superseded
    return info


def list_contenders(conn: ZooKeeperConnection) -> list[ContenderInfo]:
    """Every contender in the election, in election order (the first one leads)."""
    contenders = []
    with translate.reads("listing contenders"):
        try:
            nodes = conn.retry(conn.client.get_children, conn.paths.latch)
        except NoNodeError:
            return []
        for node in sorted(nodes, key=sequence_of):
            try:
                raw, stat = conn.retry(conn.client.get, f"{conn.paths.latch}/{node}")
            except NoNodeError:
                continue  # left while we listed
            try:
                data = json.loads(raw.decode())
                contenders.append(
                    ContenderInfo(node, data["instance_id"], data["address"], stat.ephemeralOwner)
                )
            except (ValueError, KeyError, TypeError):
                contenders.append(ContenderInfo(node, "?", "?", stat.ephemeralOwner))
    return contenders


def watch_leader_info(
    conn: ZooKeeperConnection, on_change: Callable[[LeaderInfo | None], None]
) -> None:
    """Call ``on_change`` with leader/info now and on every change of it (each lease
    renewal too), for as long as the connection lives. Runs on kazoo's event thread:
    ``on_change`` must only record, never block or call ZooKeeper."""

    def _watch(data: bytes | None, _stat: object) -> None:
        on_change(LeaderInfo.from_bytes(data) if data else None)

    conn.client.DataWatch(conn.paths.leader_info, _watch)


def publish_leader_info(
    conn: ZooKeeperConnection, fence: Fence, info: bytes, *, first: bool
) -> None:
    """Write leader/info through the leader's ``fence``: a renewal sets it; the first
    write of a term (or a renewal that finds it gone) replaces it with an ephemeral node."""
    path = conn.paths.leader_info
    if not first:
        try:
            fence.commit([Op.set(path, info)], "renewing leader info")
            return
        except ConflictError:
            pass  # our info vanished (deleted by hand?): publish it anew
    with translate.reads("reading leader info"):
        existing = conn.retry(conn.client.exists, path)
    ops = [Op.delete(path)] if existing is not None else []
    fence.commit([*ops, Op.create(path, info, ephemeral=True)], "publishing leader info")
