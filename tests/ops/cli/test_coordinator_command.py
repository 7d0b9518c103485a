"""`sparkpoint coordinator run` and `check` as a user runs them: where the configuration
file comes from, JSON logs at a chosen level, and the readiness check `helm test` runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from sparkpoint.config import CONFIG_ENV, ConfigError, config_file_location, load_config
from sparkpoint.ops.devcluster.zookeeper import free_port
from tests.service.support import SPARKPOINT
from tests.support.waiting import wait_until


def test_sparkpoint_config_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("rest:\n  port: 9123\n")
    assert load_config(environ={CONFIG_ENV: str(config)}).rest.port == 9123
    # Given explicitly, a path wins over the variable.
    other = tmp_path / "other.yaml"
    other.write_text("rest:\n  port: 9124\n")
    assert load_config(other, environ={CONFIG_ENV: str(config)}).rest.port == 9124


def test_a_missing_sparkpoint_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"{CONFIG_ENV}=.*names no file"):
        load_config(environ={CONFIG_ENV: str(tmp_path / "nope.yaml")})


def test_the_users_config_file_is_the_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "sparkpoint").mkdir(parents=True)
    user = home / ".config" / "sparkpoint" / "sparkpoint.yaml"
    user.write_text("rest:\n  port: 9125\n")
    assert config_file_location({"HOME": str(home)}) == user
    assert load_config(environ={"HOME": str(home)}).rest.port == 9125
    xdg = tmp_path / "xdg"
    assert config_file_location({"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)}) != user


@pytest.mark.slow
def test_the_coordinator_logs_json_lines_at_the_level_asked(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "coordinator.log"
    env = {**os.environ, "SPARKPOINT_LOG_FORMAT": "json"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [SPARKPOINT, "coordinator", "run", "--embedded", "--port", str(port),
             "--log-level", "debug",
             "--set", f"state.checkpoints.dir={tmp_path / 'checkpoints'}"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        done = subprocess.run(
            [SPARKPOINT, "coordinator", "check", "--coordinator", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        wait_until(
            lambda: (r := subprocess.run(
                [SPARKPOINT, "coordinator", "check", "--coordinator", f"127.0.0.1:{port}"],
                capture_output=True, text=True, timeout=60, check=False,
            )).returncode == 0 and r,
            timeout=120, message="coordinator check to pass", interval=0.5,
        )  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    assert entries, "no log lines"
    assert {"time", "level", "logger", "message"} <= entries[0].keys()
    assert "debug" in {e["level"] for e in entries}
    # Before the server answered, the check failed with a reason, not a traceback.
    assert done.returncode in (0, 1)
    assert "Traceback" not in done.stderr


def test_a_bad_log_level_is_refused() -> None:
    done = subprocess.run(
        [SPARKPOINT, "coordinator", "run", "--embedded", "--log-level", "loud"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--log-level" in done.stderr and "loud" in done.stderr
