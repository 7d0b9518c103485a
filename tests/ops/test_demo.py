"""`sparkpoint demo` as a newcomer runs it: ZooKeeper, two coordinators, a Spark pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_checkpoints_through_a_leader_kill_and_commits_output(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sparkpoint", "demo", "--json", "--dir", str(tmp_path)]
    command += ["--duration", "45", "--kill-leader-every", "20"]
    command += ["--checkpoint-interval", "2", "--parallelism", "2"]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert "pipeline-exited" not in kinds, (tmp_path / "logs" / "pipeline.log").read_text()[-3000:]
    leaders = [e for e in events if e["event"] == "leader"]
    assert len(leaders) >= 2, events  # the kill moved leadership
    assert [e["epoch"] for e in leaders] == sorted({e["epoch"] for e in leaders})
    kill = kinds.index("killed")
    checkpoints = [e["checkpoint_id"] for e in events if e["event"] == "checkpoint"]
    assert checkpoints == sorted(set(checkpoints)), "checkpoint ids must rise, never repeat"
    after_kill = [e for e in events[kill:] if e["event"] == "checkpoint"]
    assert after_kill, "no checkpoint completed after the leader was killed"
    summary = events[-1]
    assert summary["event"] == "summary"
    assert summary["committed_files"] > 0
    assert Path(summary["output"]).is_dir()
    assert summary["failovers"] and summary["failovers"][0]["handover_s"] > 0


@pytest.mark.parametrize(
    "options",
    [
        ["--source", "rabbitmq"],
        ["--sink", "postgres"],
        ["--source", "kafka"],
        ["--sink", "kafka"],
        ["--source", "kafka", "--sink", "postgres"],
    ],
    ids=["source", "sink", "kafka-source", "kafka-sink", "mixed"],
)
def test_demo_refuses_half_a_connector_pair(tmp_path: Path, options: list[str]) -> None:
    command = [sys.executable, "-m", "sparkpoint", "demo", "--dir", str(tmp_path), *options]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert "--source rabbitmq --sink postgres" in result.stderr
    assert not any(tmp_path.iterdir()), "a refused demo starts nothing"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_demo_standby_driver_takes_over_a_killed_driver(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sparkpoint", "demo", "--json", "--dir", str(tmp_path)]
    command += ["--standby-driver", "--kill-driver-every", "15", "--duration", "75"]
    command += ["--checkpoint-interval", "1", "--parallelism", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=500, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert "pipeline-exited" not in kinds, (tmp_path / "logs" / "pipeline.log").read_text()[-3000:]
    killed = kinds.index("driver-killed")
    takeover = kinds.index("driver-takeover")
    assert killed < takeover
    assert events[takeover]["pid"] != events[killed]["pid"]
    checkpoints = [e["checkpoint_id"] for e in events if e["event"] == "checkpoint"]
    assert checkpoints == sorted(set(checkpoints)), "checkpoint ids must rise, never repeat"
    restored = events[takeover]["restored_from"]
    after = [e["checkpoint_id"] for e in events[takeover:] if e["event"] == "checkpoint"]
    assert restored is not None and after and after[-1] > restored, events
    summary = events[-1]
    assert summary["event"] == "summary" and summary["driver_takeovers"]
