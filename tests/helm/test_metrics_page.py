"""The real /metrics page passes `promtool check metrics`, and holds every series the alert
rules and the dashboard are written against."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helm.artifacts import ROOT, exported_series, run_tool
from tests.support.waiting import wait_until


@pytest.fixture
def metrics_page(tmp_path: Path) -> Iterator[bytes]:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helm.exporter", "--port-file", port_file,
         "--samples"],
        cwd=ROOT,
    )  # fmt: skip
    try:
        wait_until(
            lambda: port_file.exists() or proc.poll() is not None,
            timeout=60, message="the exporter to serve /metrics",
        )  # fmt: skip
        assert proc.poll() is None, f"the exporter exited with {proc.returncode}"
        url = f"http://127.0.0.1:{port_file.read_text()}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            yield response.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_promtool_finds_nothing_wrong_with_the_metrics_page(metrics_page: bytes) -> None:
    done = run_tool("promtool", "check", "metrics", stdin=metrics_page)
    assert done.stdout.strip() == "", done.stdout


def test_the_page_holds_every_series_sparkpoint_defines(metrics_page: bytes) -> None:
    names = {
        line.split("{")[0].split(" ")[0]
        for line in metrics_page.decode().splitlines()
        if line.startswith("sparkpoint_")
    }
    assert set(exported_series()) - names == set()
