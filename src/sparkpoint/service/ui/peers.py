"""What a replica asks the others for the UI: each contender's own view for the cluster
page (or since when it has not answered), and the drivers' progress from the leader.

A contender's latch node outlives its process until the ZooKeeper session expires, and a
process restarted at the same address answers for it in the meantime. So an answer only
counts for the registration whose session the answering process holds; the others are
"not answering" — since the first probe that found them so.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from sparkpoint.ha import HAError
from sparkpoint.service.backend import ZooKeeperBackend
from sparkpoint.service.replica import Replica
from sparkpoint.service.ui.history import LeadershipHistory

#: How long one replica waits for another's own view on the cluster page.
PEER_TIMEOUT_S = 0.8


def _now_ms() -> int:
    return int(time.time() * 1000)


def own_view(replica: Replica) -> dict[str, Any]:
    """This replica as the cluster page shows it."""
    term = replica.term
    lease = term.leadership.lease_remaining() if term is not None else None
    backend = replica.backend
    zookeeper, session = "embedded", None
    if isinstance(backend, ZooKeeperBackend):
        zookeeper = backend.conn.state.value
        sid = backend.conn.session_id
        session = f"{sid:#x}" if sid is not None else None
    return {
        "instance_id": replica.instance_id,
        "address": replica.address,
        "role": replica.state(),
        "zookeeper": zookeeper,
        "session": session,
        "ready": replica.is_ready(),
        "term": term.epoch if term is not None else None,
        "epoch": term.epoch if term is not None else None,  # deprecated alias of "term"
        "lease_remaining_s": lease,
    }


def _auth_headers(auth: str | None) -> dict[str, str]:
    return {"authorization": auth} if auth else {}


def cluster_view(
    replica: Replica, probe: PeerProbe, history: LeadershipHistory, auth: str | None
) -> dict[str, Any]:
    """The leader and its lease, every contender's own view, and the failover history;
    ``auth`` is the caller's authorization, passed on to the other replicas."""
    leader = replica.known_leader()
    history.observe(leader)  # also covers the embedded backend (no watch)
    now = _now_ms()
    lease = None
    if leader is not None:
        lease = {
            "age_ms": max(now - int(leader.get("renewed_ms") or 0), 0),
            "renewals": leader.get("renewals"),
            "renewed_ms": leader.get("renewed_ms"),
            "leading_for_ms": max(now - int(leader.get("since_ms") or now), 0),
        }
    try:
        contenders = replica.backend.contenders()
    except HAError:  # ZooKeeper unreachable: still show this replica's own view
        contenders = []
    replicas = probe.views(contenders, replica, auth)
    if not any(r.get("instance_id") == replica.instance_id for r in replicas):
        replicas.append({**own_view(replica), "in_election": False, "answered": True})
    return {
        "now_ms": now,
        "served_by": own_view(replica),
        "leader": leader,
        "lease": lease,
        "replicas": replicas,
        "changes": history.changes(),
    }


def leader_progress(replica: Replica, auth: str | None) -> dict[str, dict[str, Any]]:
    """The drivers' progress as the leader heard it (drivers heartbeat to the leader only):
    asked of the leader, nothing when it does not answer in time."""
    leader = replica.known_leader()
    if not leader or not leader.get("address"):
        return {}
    try:
        answer = httpx.get(
            f"{leader['address']}/v1/ui/progress",
            timeout=PEER_TIMEOUT_S,
            headers=_auth_headers(auth),
        )
        answer.raise_for_status()
        return dict(answer.json()["jobs"])
    except (httpx.HTTPError, ValueError, KeyError):
        return {}


class PeerProbe:
    """Asks each contender for its own view and remembers since when each silent
    registration (by latch node) has not answered."""

    def __init__(self) -> None:
        self._silent_since: dict[str, int] = {}
        self._lock = threading.Lock()

    def views(
        self, contenders: list[dict[str, Any]], replica: Replica, auth: str | None
    ) -> list[dict[str, Any]]:
        out = [self._view(c, replica, auth) for c in contenders]
        with self._lock:  # forget nodes that left the election
            current = {c["node"] for c in contenders}
            for node in [n for n in self._silent_since if n not in current]:
                del self._silent_since[node]
        return out

    def _view(
        self, contender: dict[str, Any], replica: Replica, auth: str | None
    ) -> dict[str, Any]:
        base = {
            "instance_id": contender["instance_id"],
            "address": contender["address"],
            "in_election": True,
        }
        if contender["instance_id"] == replica.instance_id:
            mine = own_view(replica)
            if _same_session(contender, mine):
                return {**mine, **base, "answered": True}
            return self._silent(contender, base, "this registration is of an earlier process")
        try:
            answer = httpx.get(
                f"{contender['address']}/v1/ui/replica",
                timeout=PEER_TIMEOUT_S,
                headers=_auth_headers(auth),
            )
            answer.raise_for_status()
            view = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            return self._silent(contender, base, f"{type(exc).__name__}: {exc}")
        if not _same_session(contender, view):
            return self._silent(
                contender,
                base,
                f"another process answers at {contender['address']} "
                f"(ZooKeeper session {view.get('session')}); this registration's session "
                f"{contender.get('session')} has not expired yet",
            )
        view.pop("changes", None)
        with self._lock:
            self._silent_since.pop(contender["node"], None)
        return {**view, **base, "answered": True}

    def _silent(self, contender: dict[str, Any], base: dict[str, Any], why: str) -> dict[str, Any]:
        with self._lock:
            since = self._silent_since.setdefault(contender["node"], _now_ms())
        return {
            **base,
            "role": "unreachable",
            "zookeeper": "unknown",
            "session": contender.get("session"),
            "answered": False,
            "not_answering_since_ms": since,
            "error": why,
        }


def _same_session(contender: dict[str, Any], view: dict[str, Any]) -> bool:
    """Whether ``view`` came from the process holding ``contender``'s node (an answer
    without sessions on either side, e.g. the embedded backend, counts)."""
    ours, theirs = contender.get("session"), view.get("session")
    return ours is None or theirs is None or ours == theirs
