"""A job whose checkpoint directory the HDFS user may not write is refused when it
registers (422 naming the directory and the user), not at its first checkpoint: a real
coordinator over real HTTP, checkpoints on the suite's real HDFS with permissions on."""

from __future__ import annotations

import uuid

import httpx
import pytest

from sparkpoint.config import load_config
from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from sparkpoint.pipeline import EmbeddedChannel
from sparkpoint.service import start_service
from sparkpoint.storage import PermissionDenied, filesystem_for
from tests.support.hdfs import TEST_USER
from tests.support.waiting import wait_until

from .support import make_graph


@pytest.fixture
def theirs(hdfs_cluster: LocalHdfs) -> str:
    """A directory of HDFS' superuser (mode 755): other users may read, not write."""
    directory = f"{hdfs_cluster.webhdfs_uri}/tmp/theirs-{uuid.uuid4().hex}"
    filesystem_for(directory, user=hdfs_cluster.superuser).mkdirs(directory)
    return directory


def test_the_service_refuses_at_registration(
    theirs: str, hdfs_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADOOP_USER_NAME", TEST_USER)
    for checkpoints, allowed in ((f"{theirs}/checkpoints", False), (hdfs_dir, True)):
        config = load_config(
            overrides={
                "high-availability.type": "none",
                "rest.port": "0",
                "rest.auth.enabled": "false",
                "state.checkpoints.dir": checkpoints,
            },
            environ={},
        )
        service = start_service(config)
        try:
            wait_until(service.replica.is_ready, timeout=20, message="replica leads")
            body = {"graph": make_graph("orders").to_dict()}
            with httpx.Client(base_url=service.address, timeout=30) as http:
                answer = http.post("/v1/jobs", json=body)
                jobs = http.get("/v1/jobs").json()
        finally:
            service.stop()
        if allowed:  # the same request where the user may write: registered
            assert answer.status_code == 200, answer.text
            continue
        assert answer.status_code == 422, answer.text
        message = answer.json()["message"]
        assert f"{checkpoints}/orders" in message and repr(TEST_USER) in message
        assert "not writable" in message and "permission denied" in message
        assert "orders" not in str(jobs)  # nothing registered
        assert not filesystem_for(theirs, user=TEST_USER).list(theirs)  # nothing written


def test_an_embedded_channel_refuses_at_registration(
    theirs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADOOP_USER_NAME", TEST_USER)
    channel = EmbeddedChannel(f"{theirs}/checkpoints")
    with pytest.raises(PermissionDenied, match=f"not writable by HDFS user '{TEST_USER}'"):
        channel.register(make_graph("orders"))
    assert channel.coordinator is None
