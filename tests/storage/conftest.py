"""Filesystems under test: the local disk, and the suite's real HDFS over WebHDFS
(``hdfs_cluster`` / ``hdfs_dir`` from tests/support/hdfs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.hdfs import HDFS_OPTIONS


@pytest.fixture(params=["local", "webhdfs"])
def base_dir(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty directory on each filesystem in turn."""
    if request.param == "local":
        directory = tmp_path / "fs"
        directory.mkdir()
        return str(directory)
    return str(request.getfixturevalue("hdfs_dir"))


@pytest.fixture
def fs_options(base_dir: str) -> dict[str, Any]:
    return {} if base_dir.startswith("/") else dict(HDFS_OPTIONS)
