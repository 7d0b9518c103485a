"""A savepoint may be written only under ``state.savepoints.allowed-dirs``: a real
coordinator over real HTTP refuses every escape with 422 naming the rule, triggers
nothing, and writes nothing where it was pointed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sparkpoint.config import load_config
from sparkpoint.runs.errors import SavepointTargetError
from sparkpoint.service import Service, start_service
from sparkpoint.service.targets import check_savepoint_target
from tests.support.waiting import wait_until

from .support import make_graph

JOB = "orders"


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Service, httpx.Client, Path]]:
    allowed = tmp_path / "savepoints"
    allowed.mkdir()
    config = load_config(
        overrides={
            "high-availability.type": "none",
            "rest.port": "0",
            "rest.auth.enabled": "false",
            "state.checkpoints.dir": str(tmp_path / "checkpoints"),
            "state.savepoints.dir": str(allowed),
        },
        environ={},
    )
    assert config.storage.savepoint_roots == (str(allowed),)  # the default rule
    service = start_service(config)
    wait_until(service.replica.is_ready, timeout=20, message="replica leads")
    http = httpx.Client(base_url=service.address, timeout=10)
    body = {"graph": make_graph(JOB).to_dict(), "checkpoint_config": {"interval_ms": 3_600_000}}
    assert http.post("/v1/jobs", json=body).status_code == 200
    yield service, http, tmp_path
    http.close()
    service.stop()


def _files(directory: Path) -> list[str]:
    return sorted(str(p) for p in directory.rglob("*")) if directory.exists() else []


def test_targets_outside_the_allowed_roots_are_refused_and_nothing_is_written(setup) -> None:
    service, http, tmp_path = setup
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "savepoints" / "escape").symlink_to(outside)
    targets = {
        str(outside): "not under an allowed directory",
        f"{tmp_path}/savepoints/../outside": "'..' segments are not allowed",
        f"{tmp_path}/savepoints/escape": "resolves through a symlink",
        f"{tmp_path}/savepoints/escape/deeper": "resolves through a symlink",
        f"file://{outside}": "not under an allowed directory",
        f"hdfs://namenode:8020{tmp_path}/savepoints": "not under an allowed directory",
        f"{tmp_path}/savepoints-sibling": "not under an allowed directory",
    }
    before = _files(tmp_path)
    for target, why in targets.items():
        answer = http.post(f"/v1/jobs/{JOB}/savepoints", json={"target_dir": target, "stop": True})
        assert answer.status_code == 422, (target, answer.text)
        body = answer.json()
        assert body["error"] == "savepoint_target_refused", body
        assert why in body["message"] and "state.savepoints.allowed-dirs" in body["message"]
    assert _files(tmp_path) == before  # nothing written, here or anywhere under tmp_path
    assert service.replica.term is not None
    coordinator = service.replica.term.session(JOB).coordinator
    assert coordinator.pending_checkpoint_ids() == []  # nothing was triggered either
    inside = tmp_path / "savepoints" / "nightly"
    answer = http.post(f"/v1/jobs/{JOB}/savepoints", json={"target_dir": str(inside)})
    assert answer.status_code == 202, answer.text


def test_allowed_dirs_replace_the_default_root(tmp_path: Path) -> None:
    roots = (str(tmp_path / "a"), "hdfs://nn:8020/savepoints")
    check_savepoint_target(str(tmp_path / "a" / "x"), roots)
    check_savepoint_target("hdfs://nn:8020/savepoints/x", roots)
    for refused in ("hdfs://other:8020/savepoints/x", str(tmp_path / "b")):
        with pytest.raises(SavepointTargetError, match=r"state\.savepoints\.allowed-dirs"):
            check_savepoint_target(refused, roots)
    with pytest.raises(SavepointTargetError, match="no allowed savepoint directory"):
        check_savepoint_target(str(tmp_path), ())
