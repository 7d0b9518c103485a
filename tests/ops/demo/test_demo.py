"""`sparkpoint demo` as a newcomer runs it: ZooKeeper, two coordinators, a Spark pipeline."""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sparkpoint.examples import run_clicks
from sparkpoint.examples.clicks import expected_state
from sparkpoint.ops.cli.demo import _view
from sparkpoint.ops.demo.run import Demo, DemoOptions
from sparkpoint.ops.drills.replicas import LocalReplica, ReplicaSettings
from tests.pipeline import support


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_demo_checkpoints_through_a_leader_kill_and_commits_output(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sparkpoint", "demo", "--json", "--dir", str(tmp_path)]
    command += ["--kill-leader-every", "20", "--checkpoint-interval", "2", "--parallelism", "2"]

    def checkpointed_after_a_kill(events: list[dict[str, Any]]) -> bool:
        # A checkpoint that completes just before the kill may be reported just after
        # it: the one that counts comes after the new leader's election.
        kinds = [e["event"] for e in events]
        if "killed" not in kinds:
            return False
        after_kill = kinds[kinds.index("killed") :]
        return "leader" in after_kill and "checkpoint" in after_kill[after_kill.index("leader") :]

    events = _demo_until(command, tmp_path, checkpointed_after_a_kill)
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
    _assert_state_read_prints_each_users_state(summary["state_read"])


def _demo_until(
    command: list[str], tmp_path: Path, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """Run the demo (endless: no ``--duration``) until its events so far satisfy ``done``,
    then stop it as a user does (Ctrl-C) and return every event, the summary last. The
    events decide when it has run long enough, never a fixed duration: a loaded machine
    only makes it run longer."""
    stderr = tmp_path / "stderr.txt"
    seen: list[dict[str, Any]] = []
    with (
        stderr.open("w") as err,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True) as proc,
    ):
        try:
            events = _events_of(proc)
            deadline = time.monotonic() + 420
            while not done(seen):
                assert time.monotonic() < deadline, f"the demo's events never got there: {seen}"
                try:
                    event = events.get(timeout=5)
                except queue.Empty:
                    continue
                assert event is not None, f"the demo ended on its own: {seen}"
                seen.append(event)
                assert event["event"] != "pipeline-exited", (
                    tmp_path / "logs" / "pipeline.log"
                ).read_text()[-3000:]
        finally:
            proc.send_signal(signal.SIGINT)  # stops the pipeline at an epoch boundary
            proc.wait(180)
        try:
            while (event := events.get(timeout=120)) is not None:
                seen.append(event)
        except queue.Empty:
            raise AssertionError(
                f"the demo exited but its output did not end (a process it started "
                f"still holds it): {seen[-5:]}"
            ) from None
    assert proc.returncode == 0, stderr.read_text()[-3000:]
    return seen


def _assert_state_read_prints_each_users_state(command: str) -> None:
    """The `sparkpoint state read` command the demo's summary names, run as it is: one
    JSON line per (user, state), each value what the click job's state is after the
    records the checkpoint it read consumed. The demo's generator is a pure function of
    (seed, split, position), so that is computed offline exactly, from the source
    offsets of the same checkpoint (a job directory: its newest readable one)."""
    argv = shlex.split(command)
    assert argv[:3] == ["sparkpoint", "state", "read"] and len(argv) == 4, command
    result = subprocess.run([sys.executable, "-m", "sparkpoint", *argv[1:]],
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    read = {(x["key"], x["state"]): x["value"] for x in lines}
    assert len(read) == len(lines), "one line per (user, state)"
    # The demo's source is run_clicks' own (its splits, users and seed by default).
    demo_args = ["--checkpoint-dir", "-", "--output", "-", "--records-per-split", "0"]
    source = run_clicks.build_source(run_clicks.parser().parse_args(demo_args))
    expected = expected_state(source.records_before(support.consumed(argv[3])))
    assert len({user for user, _ in expected}) > 100
    assert read == {k: json.loads(json.dumps(v)) for k, v in expected.items()}


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
    command += ["--standby-driver", "--kill-driver-every", "15"]
    command += ["--checkpoint-interval", "1", "--parallelism", "2"]

    def checkpointed_after_the_takeover(events: list[dict[str, Any]]) -> bool:
        takeovers = [i for i, e in enumerate(events) if e["event"] == "driver-takeover"]
        if not takeovers:
            return False
        restored = events[takeovers[0]]["restored_from"] or 0
        return any(
            e["event"] == "checkpoint" and e["checkpoint_id"] > restored
            for e in events[takeovers[0] :]
        )

    events = _demo_until(command, tmp_path, checkpointed_after_the_takeover)
    kinds = [e["event"] for e in events]
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


def _events_of(proc: subprocess.Popen[str]) -> queue.Queue[dict[str, Any] | None]:
    """The demo's JSON events as they come (None once its output ends)."""
    events: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                events.put(json.loads(line))
        events.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return events


def _next(events: queue.Queue[dict[str, Any] | None], seen: list[dict[str, Any]], kind: str):
    """Read events into ``seen`` until one of ``kind`` comes (a deadline ends the wait)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        event = events.get(timeout=max(deadline - time.monotonic(), 0.1))
        assert event is not None, f"the demo ended before a {kind!r} event: {seen}"
        seen.append(event)
        if event["event"] == kind:
            return event
    raise AssertionError(f"no {kind!r} event within the deadline: {seen}")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_demo_names_its_addresses_first_and_counts_a_failover_it_did_not_cause(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-m", "sparkpoint", "demo", "--json", "--dir", str(tmp_path)]
    command += ["--duration", "50", "--checkpoint-interval", "1", "--parallelism", "2"]
    stderr = tmp_path / "stderr.txt"
    with (
        stderr.open("w") as err,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True) as proc,
    ):
        try:
            events = _events_of(proc)
            seen: list[dict[str, Any]] = []
            addresses = _next(events, seen, "addresses")
            assert [e["event"] for e in seen] == ["zookeeper", "addresses"]  # before Spark
            assert addresses["cluster_id"] == "demo" and addresses["zookeeper"].count(":") == 1
            urls = [c["rest"] for c in addresses["coordinators"]]
            assert [c["ui"] for c in addresses["coordinators"]] == [f"{u}/ui/" for u in urls]
            assert addresses["export"] == f"export SPARKPOINT_COORDINATOR='{' '.join(urls)}'"
            _next(events, seen, "checkpoint")
            leader = next(e for e in reversed(seen) if e["event"] == "leader")["leader"]
            pid = next(c["pid"] for c in addresses["coordinators"] if c["name"] == leader)
            os.kill(pid, signal.SIGKILL)  # by hand, as a user would: not the demo's own kill
            summary = _next(events, seen, "summary")
            proc.wait(120)
        finally:
            if proc.poll() is None:  # a failed assertion: stop the demo cleanly
                proc.send_signal(signal.SIGINT)
                proc.wait(120)
    assert proc.returncode == 0, stderr.read_text()[-3000:]
    (failover,) = summary["failovers"]
    assert failover["previous_leader"] == leader and failover["leader"] != leader
    assert "handover_s" not in failover  # only a kill the demo made is timed
    assert summary["cluster_id"] == "demo" and summary["coordinators"] == urls


def test_a_cleanly_stopped_coordinator_is_not_marked_killed(tmp_path: Path) -> None:
    def exited() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        proc.wait(30)
        return proc

    runner = Demo(DemoOptions(directory=tmp_path), emit=lambda _event: None)

    def replica(name: str, port: int, *, stopped: bool = False) -> LocalReplica:
        return LocalReplica(name, tmp_path, "-", "-", "-", "-", ReplicaSettings(), port,
                            exited(), stopped)  # fmt: skip

    runner.replicas = [replica("coordinator-1", 1, stopped=True), replica("coordinator-2", 2)]
    console = Console(record=True, width=200)
    console.print(_view(runner))
    rows = {
        line.split()[1]: line
        for line in console.export_text().splitlines()
        if "coordinator-" in line
    }
    assert "stopped" in rows["coordinator-1"] and "killed" not in rows["coordinator-1"]
    assert "killed" in rows["coordinator-2"]
