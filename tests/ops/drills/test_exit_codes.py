"""``sparkpoint drill`` exit status, as its docs say: 0 when every invariant held, 1 when
one was violated, 2 when the drill could not run (bad arguments, no Java, ZooKeeper or
the cluster not starting)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkpoint.ops.cli.drill import (
    EXIT_COULD_NOT_RUN,
    EXIT_OK,
    EXIT_VIOLATED,
    report_and_exit_code,
)
from sparkpoint.ops.drills import DrillReport, Invariant, IterationResult, check_ids_rising
from sparkpoint.ops.drills.cluster import DrillError
from sparkpoint.ops.drills.report import bounds_on_scale

OPTS = {"as_json": False, "report_dir": None}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparkpoint", "drill", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=env)  # fmt: skip


def report(*invariants: Invariant) -> DrillReport:
    return DrillReport("chaos", {}, [IterationResult(1, "kill-9 c1", 1.0, 2.0, 1, 2, "c2",
                                                     list(invariants))])  # fmt: skip


def test_every_invariant_held_exits_0() -> None:
    assert report_and_exit_code(OPTS, lambda _: report(check_ids_rising([1, 2]))) == EXIT_OK


def test_a_violated_invariant_exits_1(tmp_path: Path) -> None:
    opts = {**OPTS, "report_dir": tmp_path / "r"}
    code = report_and_exit_code(opts, lambda _: report(check_ids_rising([1, 2, 2])))
    assert code == EXIT_VIOLATED
    assert "VIOLATED" in (tmp_path / "r" / "summary.txt").read_text()


def test_a_drill_that_could_not_run_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    def never(_: object) -> DrillReport:
        raise DrillError("no leader completing checkpoints (cluster not steady)")

    assert report_and_exit_code(OPTS, never) == EXIT_COULD_NOT_RUN
    assert "could not run: no leader completing" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["chaos", "--local", "--iterations", "0"], "--iterations"),
        (["chaos", "--local", "--fault", "unplug"], "unplug"),
        (["chaos", "--zookeeper", "127.0.0.1:1", "--cluster-id", "c"], "runs with --local"),
        (["kill-leader", "--local", "--takeover-timeout", "40"], "below the session timeout"),
        (["kill-leader", "--local", "--state-backend", "disk"], "'disk' is not one of"),
        (
            ["kill-leader", "--local", "--workload", "driver", "--state-backend", "rocksdb"],
            "the state backend is the demo pipeline's",
        ),
        (["chaos", "--local", "--num-retained", "0"], "--num-retained"),
    ],
)
def test_bad_arguments_exit_2_naming_what_is_wrong(args: list[str], words: str) -> None:
    done = run_cli(*args)
    assert done.returncode == EXIT_COULD_NOT_RUN, done.stderr
    assert words in done.stderr


def test_no_java_exits_2_and_says_so(tmp_path: Path) -> None:
    # A PATH with this Python and nothing else: no java to start ZooKeeper with.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("JAVA_HOME", None)
    done = run_cli("chaos", "--local", "--iterations", "1", "--dir", str(tmp_path / "w"), env=env)
    assert done.returncode == EXIT_COULD_NOT_RUN, done.stderr[-2000:]
    assert "java not found" in done.stderr


def test_a_session_timeout_far_above_the_figures_is_named_not_drawn() -> None:
    bounds = [("lease takeover timeout", 1.5), ("session timeout", 30.0), ("unset", None)]
    drawn, off = bounds_on_scale(1.8, bounds)
    assert drawn == [("lease takeover timeout", 1.5)]
    assert off == [("session timeout", 30.0)]
    # Figures near the session timeout: both lines belong on the chart.
    assert bounds_on_scale(12.0, bounds) == (bounds[:2], [])


def test_the_report_names_the_drill_directory(tmp_path: Path) -> None:
    r = DrillReport("kill-leader", {"directory": str(tmp_path), "session_timeout_s": 30.0,
                                    "takeover_timeout_s": 1.5},
                    [IterationResult(1, "kill-9 c1", 0.1, 1.8, 1, 2, "c2", [])])  # fmt: skip
    assert any(str(tmp_path) in line for line in r.summary_lines())
    paths = r.write(tmp_path / "report")
    assert (tmp_path / "report" / "failover.png").read_bytes().startswith(b"\x89PNG"), paths
