"""The chart's README is generated from the comments in values.yaml, and kept current."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helm.artifacts import CHART, ROOT

SCRIPT = ROOT / "scripts" / "chart_readme.py"


def test_the_chart_readme_is_generated_from_values() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_top_level_value_is_in_the_readme() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for key in values:
        assert f"| `{key}" in readme, key


def test_the_check_fails_when_the_readme_is_stale(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    with open(chart / "values.yaml", "a") as values:
        values.write("# A value added without regenerating the README.\nnewValue: 1\n")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--chart", str(chart)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "out of date" in done.stderr
