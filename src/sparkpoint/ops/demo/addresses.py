"""Where the demo's parts are, as one event: printed as soon as a leader is elected, so a
second terminal can point the CLI and a browser at the running demo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class _Replica(Protocol):
    name: str
    address: str  # http://host:port
    proc: Any


def addresses_event(zookeeper: str, cluster_id: str, replicas: Sequence[_Replica]) -> dict:
    """The ``addresses`` event: each coordinator's web UI and REST address, ZooKeeper,
    the cluster id, and an ``export SPARKPOINT_COORDINATOR=…`` line for the CLI."""
    rest = [r.address for r in replicas]
    return {
        "event": "addresses",
        "zookeeper": zookeeper,
        "cluster_id": cluster_id,
        "coordinators": [
            {
                "name": r.name,
                "pid": r.proc.pid if r.proc is not None else None,
                "rest": url,
                "ui": f"{url}/ui/",
            }
            for r, url in zip(replicas, rest, strict=True)
        ],
        "export": f"export SPARKPOINT_COORDINATOR='{' '.join(rest)}'",
    }
