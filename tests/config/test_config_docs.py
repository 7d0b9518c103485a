"""docs/service.md lists exactly the configuration keys sparkpoint.config knows, and bad
values are refused at start-up naming the key, the value and why."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sparkpoint.config import all_keys, env_name
from tests.service.support import SPARKPOINT

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def test_every_key_is_documented_and_nothing_else() -> None:
    rows = re.findall(r"^\| `([a-z0-9.-]+)` \| `[^`]*` \| `([A-Z0-9_]+)` \|", DOC.read_text(), re.M)
    assert {key for key, _ in rows} == set(all_keys())
    for key, env in rows:
        assert env == env_name(key)


def test_invalid_values_are_refused_at_start(tmp_path: Path) -> None:
    cases = {
        "rest.port=99999": "rest.port",
        "execution.checkpointing.interval=1 ms": "execution.checkpointing.interval",
        "heartbeat.timeout=soon": "heartbeat.timeout",
        "high-availability.type=etcd": "high-availability.type",
        "state.checkpoints.dir=relative/dir": "state.checkpoints.dir",
        "no.such.key=1": "no.such.key",
    }
    for setting, key in cases.items():
        result = subprocess.run(
            [SPARKPOINT, "coordinator", "run", "--set", setting],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        value = setting.split("=", 1)[1]
        assert result.returncode == 1, result
        assert key in result.stderr and value in result.stderr, result.stderr
