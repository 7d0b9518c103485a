"""`sparkpoint zookeeper` and `sparkpoint demo` as a user runs them: real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, find_classpath, server_mode


def sparkpoint(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparkpoint.ops.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_classpath_is_found_without_configuration() -> None:
    assert "zookeeper" in find_classpath()


@pytest.mark.slow
def test_start_status_stop_a_three_server_ensemble(tmp_path: Path) -> None:
    directory = tmp_path / "zk"
    started = sparkpoint("zookeeper", "start", "--servers", "3", "--tick-ms", "250",
                         "--dir", str(directory), "--json")  # fmt: skip
    assert started.returncode == 0, started.stderr
    connect = json.loads(started.stdout)["connect_string"]
    try:
        assert len(connect.split(",")) == 3
        status = sparkpoint("zookeeper", "status", "--dir", str(directory), "--json")
        assert status.returncode == 0
        modes = sorted(s["mode"] for s in json.loads(status.stdout)["servers"])
        assert modes == ["follower", "follower", "leader"]
        again = sparkpoint("zookeeper", "start", "--dir", str(directory))
        assert again.returncode != 0 and "is running" in again.stderr
    finally:
        stopped = sparkpoint("zookeeper", "stop", "--dir", str(directory))
    assert stopped.returncode == 0
    host, port = connect.split(",")[0].split(":")
    assert server_mode(host, int(port)) is None
    after = sparkpoint("zookeeper", "status", "--dir", str(directory))
    assert after.returncode == 1


def test_stop_without_a_start_names_the_directory(tmp_path: Path) -> None:
    result = sparkpoint("zookeeper", "stop", "--dir", str(tmp_path / "nothing"))
    assert result.returncode != 0
    assert "no ZooKeeper was started from" in result.stderr


def test_a_broken_classpath_fails_with_the_log_location(tmp_path: Path) -> None:
    zk = LocalZooKeeper(tmp_path / "zk", classpath="/nonexistent/*")
    with pytest.raises(Exception, match="exited"):
        zk.start(timeout=30)
    assert zk.running_servers() == []
