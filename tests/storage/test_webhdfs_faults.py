"""WebHDFS failures surface as storage errors naming the path, and leave no `_metadata`.

These need the bundled server (they make it fail on purpose), so they use it even when a
real cluster is configured.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest

from sparkpoint.storage import (
    CheckpointStorage,
    FileNotFound,
    StorageError,
    StorageUnavailable,
    filesystem_for,
)
from tests.storage.conftest import HDFS_OPTIONS, webhdfs_uri
from tests.storage.test_checkpoint_storage import JOB, make_checkpoint
from tests.support.webhdfs_server import WebHdfsServer


@pytest.fixture
def base(webhdfs_server: WebHdfsServer) -> Iterator[str]:
    yield f"{webhdfs_uri(webhdfs_server.url)}/faults/{uuid.uuid4().hex}"
    # A fault a failing test did not consume must not hit the next test.
    assert webhdfs_server.clear_faults() == 0


def _assert_clean(error: BaseException, path: str) -> None:
    assert isinstance(error, StorageError)
    assert path in str(error)
    assert "Traceback" not in str(error) and "<html" not in str(error).lower()


def test_failed_metadata_upload_leaves_no_metadata(
    webhdfs_server: WebHdfsServer, base: str
) -> None:
    storage = CheckpointStorage(base, **HDFS_OPTIONS)
    location = storage.init_checkpoint(JOB, 1)
    checkpoint = make_checkpoint(location, 1)
    webhdfs_server.inject_fault(
        "CREATE",
        role="datanode",
        status=500,
        body={
            "RemoteException": {
                "exception": "IOException",
                "javaClassName": "java.io.IOException",
                "message": "All datanodes are bad. Aborting...",
            }
        },
    )
    with pytest.raises(StorageError) as caught:
        location.commit_metadata(checkpoint)
    _assert_clean(caught.value, location.directory)
    assert "All datanodes are bad" in str(caught.value)
    fs = storage.filesystem(base)
    names = [s.name for s in fs.list(location.directory)]
    assert "_metadata" not in names
    assert not [n for n in names if n.startswith(".")]  # no temporary file either
    # The location is still usable: the retry commits.
    location.commit_metadata(checkpoint)
    assert storage.read_metadata(location.directory) == checkpoint


def test_failed_rename_leaves_no_metadata(webhdfs_server: WebHdfsServer, base: str) -> None:
    fs = filesystem_for(base, **HDFS_OPTIONS)
    webhdfs_server.inject_fault("RENAME", status=200, body={"boolean": False})
    with pytest.raises(StorageError, match="rename"):
        fs.write_atomic(f"{base}/_metadata", b"data")
    assert fs.list(base) == []


def test_html_error_page_becomes_a_storage_error(webhdfs_server: WebHdfsServer, base: str) -> None:
    fs = filesystem_for(base, **HDFS_OPTIONS)
    webhdfs_server.inject_fault("GETFILESTATUS", status=502, body=b"<html>Bad Gateway</html>")
    with pytest.raises(StorageError) as caught:
        fs.status(f"{base}/x")
    assert f"{base}/x" in str(caught.value)


def test_permission_denied(webhdfs_server: WebHdfsServer, base: str) -> None:
    fs = filesystem_for(base, **HDFS_OPTIONS)
    webhdfs_server.inject_fault(
        "MKDIRS",
        status=403,
        body={
            "RemoteException": {
                "exception": "AccessControlException",
                "javaClassName": "org.apache.hadoop.security.AccessControlException",
                "message": "Permission denied: user=bob, access=WRITE",
            }
        },
    )
    with pytest.raises(StorageError, match="permission denied") as caught:
        fs.mkdirs(f"{base}/d")
    _assert_clean(caught.value, f"{base}/d")


def test_namenode_without_redirect_is_an_unexpected_answer(
    webhdfs_server: WebHdfsServer, base: str
) -> None:
    fs = filesystem_for(base, **HDFS_OPTIONS)
    webhdfs_server.inject_fault("CREATE", status=200, body={"unexpected": True})
    with pytest.raises(StorageError, match="unexpected answer from WebHDFS"):
        fs.create_exclusive(f"{base}/f", b"x")
    assert not fs.exists(f"{base}/f")


def test_missing_file_is_file_not_found(base: str) -> None:
    fs = filesystem_for(base, **HDFS_OPTIONS)
    with pytest.raises(FileNotFound) as caught:
        fs.read(f"{base}/nothing")
    _assert_clean(caught.value, f"{base}/nothing")


def test_unreachable_namenode(base: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fs = filesystem_for(f"webhdfs://127.0.0.1:{port}/x", user="u", timeout=5)
    with pytest.raises(StorageUnavailable, match="unreachable") as caught:
        fs.status(f"webhdfs://127.0.0.1:{port}/x/y")
    _assert_clean(caught.value, f"webhdfs://127.0.0.1:{port}/x/y")


def test_kerberos_without_its_package_says_what_is_missing(base: str) -> None:
    fs = filesystem_for(base, auth="kerberos")
    with pytest.raises(StorageError, match="requests-kerberos"):
        fs.status(base)


def test_unknown_options_are_refused() -> None:
    with pytest.raises(StorageError, match="unknown filesystem option"):
        filesystem_for("hdfs://nn:8020/x", usr="typo")


def test_hdfs_scheme_uses_the_webhdfs_port() -> None:
    fs = filesystem_for("hdfs://namenode.example:8020/ckpt", webhdfs_port=50070)
    assert fs.address == "http://namenode.example:50070"  # type: ignore[attr-defined]
