"""HDFS failures surface as storage errors naming the path, and leave no `_metadata`.

Every fault comes from the suite's real NameNode and DataNodes (safe mode entered with
Hadoop's own ``dfsadmin``, a space quota, permissions, a name taken), except two that a
real HDFS never gives and a proxy or a broken server in front of it does: an HTML error
page instead of JSON, and a NameNode answer without its redirect. Those two are answered
by a few lines of ``http.server`` here.
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkpoint.ops.devcluster.hdfs import DFS_ADMIN_MAIN, LocalHdfs
from sparkpoint.storage import (
    CheckpointStorage,
    FileAlreadyExists,
    FileNotFound,
    StorageError,
    StorageUnavailable,
    filesystem_for,
)
from sparkpoint.storage.uri import parse
from tests.storage.test_checkpoint_storage import JOB, make_checkpoint
from tests.support.hdfs import HDFS_OPTIONS


def _assert_clean(error: BaseException, path: str) -> None:
    assert isinstance(error, StorageError)
    assert path in str(error)
    assert "Traceback" not in str(error) and "<html" not in str(error).lower()


def _admin(cluster: LocalHdfs, *args: str) -> str:
    result = cluster.run_tool(DFS_ADMIN_MAIN, *args)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout.decode()


def test_safe_mode_refuses_the_commit_clearly_and_the_retry_commits(
    hdfs_cluster: LocalHdfs, hdfs_dir: str
) -> None:
    # Safe mode is waited out for retry_s (a restarting NameNode leaves it by itself).
    storage = CheckpointStorage(hdfs_dir, **HDFS_OPTIONS, retry_s=1)
    location = storage.init_checkpoint(JOB, 1)
    checkpoint = make_checkpoint(location, 1)
    _admin(hdfs_cluster, "-safemode", "enter")
    try:
        with pytest.raises(StorageUnavailable, match="HDFS is in safe mode") as caught:
            location.commit_metadata(checkpoint)
        _assert_clean(caught.value, location.directory)
    finally:
        _admin(hdfs_cluster, "-safemode", "leave")
    names = [s.name for s in storage.filesystem(hdfs_dir).list(location.directory)]
    assert "_metadata" not in names and not [n for n in names if n.startswith(".")]
    location.commit_metadata(checkpoint)  # the location is still usable: the retry commits
    assert storage.read_metadata(location.directory) == checkpoint


def test_no_space_left_is_a_clear_error_and_leaves_no_metadata(
    hdfs_cluster: LocalHdfs, hdfs_dir: str
) -> None:
    storage = CheckpointStorage(hdfs_dir, **HDFS_OPTIONS)
    location = storage.init_checkpoint(JOB, 1)
    checkpoint = make_checkpoint(location, 1)
    # A space quota below one block: the NameNode refuses the block as a full cluster would.
    _admin(hdfs_cluster, "-setSpaceQuota", "4k", parse(location.directory).path)
    with pytest.raises(StorageError, match="no space") as caught:
        location.commit_metadata(checkpoint)
    _assert_clean(caught.value, location.directory)
    fs = storage.filesystem(hdfs_dir)
    assert [s.name for s in fs.list(location.directory)] == []
    _admin(hdfs_cluster, "-clrSpaceQuota", parse(location.directory).path)
    location.commit_metadata(checkpoint)
    assert storage.read_metadata(location.directory) == checkpoint


def test_an_existing_metadata_is_never_overwritten(hdfs_dir: str) -> None:
    storage = CheckpointStorage(hdfs_dir, **HDFS_OPTIONS)
    location = storage.init_checkpoint(JOB, 1)
    checkpoint = make_checkpoint(location, 1)
    first = location.commit_metadata(checkpoint)
    fs = storage.filesystem(hdfs_dir)
    before = fs.read(first.uri)
    with pytest.raises(FileAlreadyExists):
        location.commit_metadata(checkpoint)
    with pytest.raises(FileAlreadyExists):
        fs.write_atomic(first.uri, b"other bytes")
    other = f"{location.directory}/other"
    fs.create_exclusive(other, b"x")
    with pytest.raises(FileAlreadyExists):
        fs.rename(other, first.uri)  # HDFS' rename would move it *into* a directory; never
    assert fs.read(first.uri) == before
    assert sorted(s.name for s in fs.list(location.directory)) == ["_metadata", "other"]


def test_a_reader_never_sees_a_partial_metadata(hdfs_dir: str) -> None:
    fs = filesystem_for(hdfs_dir, **HDFS_OPTIONS)
    target = f"{hdfs_dir}/_metadata"
    data = bytes(range(256)) * (12 * 1024)  # 3 MiB: three blocks on the test cluster
    seen: list[int] = []

    def read_until_complete() -> None:
        # Reads as fast as it can from before the write until it gets the file once.
        while not seen or seen[-1] == 0:
            try:
                seen.append(len(fs.read(target)))
            except FileNotFound:
                seen.append(0)

    reader = threading.Thread(target=read_until_complete)
    reader.start()
    fs.write_atomic(target, data)
    reader.join(60)
    assert not reader.is_alive() and seen[-1] == len(data)  # whole, never a prefix
    assert set(seen) <= {0, len(data)}
    assert [s.name for s in fs.list(hdfs_dir)] == ["_metadata"]


def test_permission_denied_names_the_path_and_the_user(
    hdfs_cluster: LocalHdfs, hdfs_dir: str
) -> None:
    theirs = f"{hdfs_cluster.webhdfs_uri}/tmp/theirs-{uuid.uuid4().hex}"
    filesystem_for(theirs, user=hdfs_cluster.superuser).mkdirs(theirs)  # 755, the superuser's
    fs = filesystem_for(theirs, **HDFS_OPTIONS)
    with pytest.raises(StorageError, match="permission denied") as caught:
        fs.mkdirs(f"{theirs}/d")
    _assert_clean(caught.value, f"{theirs}/d")
    assert HDFS_OPTIONS["user"] in str(caught.value)


def test_missing_file_is_file_not_found(hdfs_dir: str) -> None:
    fs = filesystem_for(hdfs_dir, **HDFS_OPTIONS)
    with pytest.raises(FileNotFound) as caught:
        fs.read(f"{hdfs_dir}/nothing")
    _assert_clean(caught.value, f"{hdfs_dir}/nothing")


# --- faults a real HDFS cannot give: a proxy's HTML page, a server off the protocol -------


@pytest.fixture
def answering() -> Iterator[object]:
    """A server that answers every request with one canned (status, body)."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int, body: bytes) -> str:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = _answer

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"webhdfs://127.0.0.1:{server.server_address[1]}/faults"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_html_error_page_becomes_a_storage_error(answering: object) -> None:
    base = answering(502, b"<html>Bad Gateway</html>")  # type: ignore[operator]
    fs = filesystem_for(base, **HDFS_OPTIONS)
    with pytest.raises(StorageError) as caught:
        fs.status(f"{base}/x")
    _assert_clean(caught.value, f"{base}/x")


def test_namenode_without_redirect_is_an_unexpected_answer(answering: object) -> None:
    base = answering(200, json.dumps({"unexpected": True}).encode())  # type: ignore[operator]
    fs = filesystem_for(base, **HDFS_OPTIONS)
    with pytest.raises(StorageError, match="unexpected answer from WebHDFS"):
        fs.create_exclusive(f"{base}/f", b"x")


def test_unreachable_namenode() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Calls that may be repeated are, for retry_s (a NameNode restarting), then give up.
    fs = filesystem_for(f"webhdfs://127.0.0.1:{port}/x", user="u", timeout=5, retry_s=1)
    with pytest.raises(StorageUnavailable, match="unreachable") as caught:
        fs.status(f"webhdfs://127.0.0.1:{port}/x/y")
    _assert_clean(caught.value, f"webhdfs://127.0.0.1:{port}/x/y")


def test_kerberos_without_its_package_says_what_is_missing(hdfs_dir: str) -> None:
    fs = filesystem_for(hdfs_dir, auth="kerberos")
    with pytest.raises(StorageError, match="requests-kerberos"):
        fs.status(hdfs_dir)


def test_unknown_options_are_refused() -> None:
    with pytest.raises(StorageError, match="unknown filesystem option"):
        filesystem_for("hdfs://nn:8020/x", usr="typo")


def test_hdfs_scheme_uses_the_webhdfs_port() -> None:
    fs = filesystem_for("hdfs://namenode.example:8020/ckpt", webhdfs_port=50070)
    assert fs.address == "http://namenode.example:50070"  # type: ignore[attr-defined]
