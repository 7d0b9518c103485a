"""The cluster page after a kill -9 and a restart at the same address: the dead
process's registration stays in the election until its session expires, and the page
says it is not answering instead of showing the new process's answer twice."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until


def _entries(replica: ReplicaProcess, instance_id: str) -> list[dict[str, Any]]:
    cluster = httpx.get(f"{replica.address}/v1/ui/cluster", timeout=10).json()
    return [r for r in cluster["replicas"] if r["instance_id"] == instance_id]


@pytest.mark.slow
def test_a_killed_replicas_registration_is_not_answering(replicas) -> None:
    # A long session keeps the killed process's latch node for the whole test.
    victim: ReplicaProcess = replicas("a", session_timeout="60 s")
    other: ReplicaProcess = replicas("b")
    wait_leader([victim, other], timeout=90)
    (before,) = wait_until(
        lambda: [e for e in _entries(other, "a") if e["answered"]] or None,
        timeout=30,
        message="a answering in b's cluster view",
    )
    victim.kill()  # kill -9

    (dead,) = wait_until(
        lambda: [e for e in _entries(other, "a") if not e["answered"]] or None,
        timeout=30,
        message="the killed process's registration marked as not answering",
    )
    assert dead["session"] == before["session"] and dead["not_answering_since_ms"] > 0
    assert "ready" not in dead and dead["role"] == "unreachable"

    restarted = replicas("a", session_timeout="60 s", port=victim.port)

    def both() -> list[dict[str, Any]] | None:
        entries = _entries(other, "a")
        return entries if len(entries) == 2 and any(e["answered"] for e in entries) else None

    entries = wait_until(both, timeout=90, message="the restarted a in the election too")
    old = next(e for e in entries if e["session"] == before["session"])
    new = next(e for e in entries if e["session"] != before["session"])
    assert not old["answered"], old  # the new process answers at its address, not for it
    assert old["not_answering_since_ms"] == dead["not_answering_since_ms"]
    assert "another process answers" in old["error"]
    assert new["answered"] and new["ready"] and new["role"] in ("leader", "follower"), new
    # The restarted replica says the same about the registration it replaced.
    mine = _entries(restarted, "a")
    assert sorted(e["answered"] for e in mine) == [False, True], mine
