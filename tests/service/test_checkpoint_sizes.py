"""Checkpointed and full size of incremental checkpoints through the service: the
coordinator's statistics, the REST and UI answers, `sparkpoint checkpoints list|show`
(tables and --json) and the metrics — from a leader, then from ZooKeeper and storage
alone. The acknowledged handles are real RocksDB snapshots."""

from __future__ import annotations

from pathlib import Path

import httpx

from sparkpoint.checkpoint import KeyGroupRange
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from tests.support.incremental import ack_body, two_snapshots

from .test_api_requests import JOB, _service, register
from .test_cli import cli


def _metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(f'{name}{{job_id="{JOB}"}}'))
    return float(line.split()[-1])


def test_checkpointed_and_full_size_from_the_leader_then_from_zookeeper(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str
) -> None:
    low = two_snapshots(tmp_path, KeyGroupRange(0, 63), job=JOB, index=0)
    high = two_snapshots(tmp_path, KeyGroupRange(64, 127), job=JOB, index=1)
    first_full = low[0].handle.state_size + high[0].handle.state_size
    written = low[1].written + high[1].written  # by the second checkpoint
    full = low[1].handle.state_size + high[1].handle.state_size
    assert written < full

    service = _service(tmp_path, zk_server.connect_string, cluster_id)
    at = ["--coordinator", service.address]
    try:
        with httpx.Client(base_url=service.address, timeout=10) as http:
            run = register(http)
            ids = []
            for snapshot in (0, 1):
                cid = int(http.post(f"/v1/jobs/{JOB}/checkpoints").json()["checkpoint_id"])
                keyed = {0: low[snapshot], 1: high[snapshot]}
                reply = http.post(
                    f"/v1/jobs/{JOB}/checkpoints/{cid}/acks", json=ack_body(run, 2, keyed)
                )
                assert reply.json()["status"] == "completed", reply.text
                ids.append(cid)
            first, second = ids

            detail = http.get(f"/v1/jobs/{JOB}/checkpoints/{second}").json()
            assert (detail["checkpointed_size"], detail["state_size"]) == (written, full)
            acks = {(a["operator"], a["subtask"]): a for a in detail["subtask_acks"]}
            assert acks["count", 1]["checkpointed_size"] == high[1].written
            assert acks["count", 1]["state_size"] == high[1].handle.state_size
            assert acks["source", 0]["checkpointed_size"] == acks["source", 0]["state_size"] == 0
            assert detail["pointer"]["checkpointed_size"] == written

            ui = http.get(f"/v1/ui/jobs/{JOB}/history").json()
            assert ui["chart"]["columns"][-2:] == ["size_bytes", "checkpointed_bytes"]
            assert ui["chart"]["rows"][-1][-2:] == [full, written]
            assert ui["chart"]["rows"][0][-2:] == [first_full, first_full]
            (job,) = http.get("/v1/ui/jobs").json()["jobs"]
            assert job["last_checkpoint"]["checkpointed_size"] == written
            metrics = http.get("/metrics").text
            checkpointed = "sparkpoint_last_completed_checkpoint_checkpointed_size_bytes"
            assert _metric(metrics, checkpointed) == written
            assert _metric(metrics, "sparkpoint_last_completed_checkpoint_size_bytes") == full

        overview = cli("checkpoints", "list", JOB, *at, "--json")
        history = {e["id"]: e for e in overview["history"]}
        assert history[first]["checkpointed_size"] == history[first]["state_size"] == first_full
        assert (history[second]["checkpointed_size"], history[second]["state_size"]) == (
            written,
            full,
        )
        summary = overview["summary"]
        assert summary["checkpointed_size"] == {
            "min": written,
            "max": first_full,
            "avg": (written + first_full) // 2,
        }
        listing = cli("checkpoints", "list", JOB, *at)
        assert "checkpointed" in listing and f"{written}" in listing and f"{full}" in listing
    finally:
        service.stop()

    # No coordinator: the pointer in ZooKeeper and the _metadata give the same figures.
    zk = ["--zookeeper", zk_server.connect_string, "--cluster-id", cluster_id]
    shown = cli("checkpoints", "show", JOB, str(second), *zk, "--json")
    assert (shown["checkpointed_size"], shown["state_size"]) == (written, full)
    metadata = shown["metadata"]
    assert (metadata["checkpointed_size"], metadata["state_size"]) == (written, full)
    (count,) = (op for op in metadata["operators"] if op["uid"] == "count")
    assert [s["checkpointed_size"] for s in count["subtasks"]] == [low[1].written, high[1].written]
    table = cli("checkpoints", "show", JOB, str(second), *zk)
    assert f"checkpointed size: {written} bytes" in table, table
    assert f"full size: {full} bytes" in table, table
    row = next(line for line in table.splitlines() if "count" in line and " 1 " in line)
    assert f"{high[1].written}" in row and f"{high[1].handle.state_size}" in row, row
    listing = cli("checkpoints", "list", JOB, *zk, "--json")
    (pointer,) = (p for p in listing["retained"] if p["checkpoint_id"] == second)
    assert (pointer["checkpointed_size"], pointer["state_size"]) == (written, full)
