"""The status model answers from the leader's live sessions, and without a term (a
follower, the CLI) from ZooKeeper: on the leader the UI's and the API's job views come
from the session even when the stored record says otherwise (real ZooKeeper, real HTTP)."""

from __future__ import annotations

from pathlib import Path

import httpx

from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.service.backend import ZooKeeperBackend
from sparkpoint.service.status import StatusReader
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import JobRecord

from .support import make_graph, start_in_process

JOB = "orders"
ELSEWHERE = "run-only-in-zookeeper"


def test_the_leader_answers_from_its_sessions_and_a_reader_without_term_from_zookeeper(
    tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str, observer: ZooKeeperConnection
) -> None:
    service = start_in_process(tmp_path, zk_server.connect_string, cluster_id)
    try:
        with httpx.Client(base_url=service.address, timeout=10) as http:
            body = {
                "graph": make_graph(JOB).to_dict(),
                "checkpoint_config": {"interval_ms": 3_600_000},
            }
            reply = http.post("/v1/jobs", json=body)
            assert reply.status_code == 200, reply.text
            run = reply.json()["run_id"]
            # The stored record now names another run than the leader's session holds.
            path = observer.paths.job(JOB)
            raw, _ = observer.client.get(path)
            observer.client.set(path, JobRecord.from_bytes(raw).with_run(ELSEWHERE).to_bytes())

            (row,) = http.get("/v1/ui/jobs").json()["jobs"]
            assert row["driver_run"] == run, row
            (summary,) = http.get("/v1/jobs").json()["jobs"]
            assert summary["driver_run"] == run, summary

        storage = CheckpointStorage(str(tmp_path / "checkpoints"))
        reader = StatusReader(ZooKeeperBackend(observer), storage, None)
        (state,) = reader.states()
        assert state.driver_runs() == (ELSEWHERE, None)
        assert reader.job(JOB)["source"] == "zookeeper"
    finally:
        service.stop()
