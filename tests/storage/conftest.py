"""Filesystems under test: the local disk, and HDFS over WebHDFS.

WebHDFS is the bundled server (tests/support/webhdfs_server.py) unless
``SPARKPOINT_TEST_WEBHDFS_URL`` names a real namenode (``http://namenode:9870``); then
the same tests run against that cluster, as ``SPARKPOINT_TEST_WEBHDFS_USER`` (default
``sparkpoint-test``) under ``SPARKPOINT_TEST_WEBHDFS_ROOT`` (default ``/tmp/sparkpoint-tests``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from sparkpoint.storage import filesystem_for
from tests.support.webhdfs_server import WebHdfsServer

REAL_CLUSTER_URL = os.environ.get("SPARKPOINT_TEST_WEBHDFS_URL", "")
HDFS_OPTIONS: dict[str, Any] = {
    "user": os.environ.get("SPARKPOINT_TEST_WEBHDFS_USER", "sparkpoint-test"),
    "timeout": 30,
}


def webhdfs_uri(http_url: str) -> str:
    parts = urlsplit(http_url)
    scheme = "swebhdfs" if parts.scheme == "https" else "webhdfs"
    return f"{scheme}://{parts.netloc}"


@pytest.fixture(scope="session")
def webhdfs_server() -> Iterator[WebHdfsServer]:
    """The bundled server, always (fault injection needs it)."""
    with WebHdfsServer() as server:
        yield server


@pytest.fixture(scope="session")
def webhdfs_endpoint(request: pytest.FixtureRequest) -> str:
    if REAL_CLUSTER_URL:
        return webhdfs_uri(REAL_CLUSTER_URL)
    server: WebHdfsServer = request.getfixturevalue("webhdfs_server")
    return webhdfs_uri(server.url)


@pytest.fixture
def hdfs_dir(webhdfs_endpoint: str) -> Iterator[str]:
    root = os.environ.get("SPARKPOINT_TEST_WEBHDFS_ROOT", "/tmp/sparkpoint-tests")
    directory = f"{webhdfs_endpoint}{root}/{uuid.uuid4().hex}"
    fs = filesystem_for(directory, **HDFS_OPTIONS)
    fs.mkdirs(directory)
    yield directory
    fs.delete(directory, recursive=True)


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
