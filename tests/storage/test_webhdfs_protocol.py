"""The WebHDFS REST API as a real NameNode speaks it, checked with plain HTTP: the
behaviour sparkpoint's storage relies on (two-step CREATE, no overwrite, rename answers)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from tests.support.hdfs import HDFS_OPTIONS


@pytest.fixture
def api(hdfs_cluster: LocalHdfs) -> Iterator[Any]:
    base_url = f"http://{hdfs_cluster.http_address}"
    root = f"/tmp/sparkpoint-tests/{uuid.uuid4().hex}"
    session = requests.Session()
    session.params = {"user.name": HDFS_OPTIONS["user"]}

    def call(method: str, path: str, op: str, **kwargs: Any) -> requests.Response:
        params = {"op": op, **kwargs.pop("params", {})}
        return session.request(
            method, f"{base_url}/webhdfs/v1{root}{path}", params=params, timeout=30, **kwargs
        )

    call.root = root  # type: ignore[attr-defined]
    yield call
    call("DELETE", "", "DELETE", params={"recursive": "true"})
    session.close()


def _create(api: Any, path: str, data: bytes, overwrite: str = "false") -> requests.Response:
    step1 = api("PUT", path, "CREATE", params={"overwrite": overwrite}, allow_redirects=False)
    assert step1.status_code == 307
    return requests.put(step1.headers["Location"], data=data, timeout=30)


def test_create_is_two_steps_through_a_redirect(api: Any) -> None:
    step1 = api("PUT", "/f", "CREATE", params={"overwrite": "false"}, allow_redirects=False)
    assert step1.status_code == 307
    assert "op=CREATE" in step1.headers["Location"]
    step2 = requests.put(step1.headers["Location"], data=b"hello", timeout=30)
    assert step2.status_code == 201
    status = api("GET", "/f", "GETFILESTATUS").json()["FileStatus"]
    assert (status["type"], status["length"], status["pathSuffix"]) == ("FILE", 5, "")


def test_create_without_overwrite_conflicts(api: Any) -> None:
    assert _create(api, "/f", b"one").status_code == 201
    conflict = _create(api, "/f", b"two")
    assert conflict.status_code == 403
    assert conflict.json()["RemoteException"]["exception"] == "FileAlreadyExistsException"
    assert _create(api, "/f", b"three", overwrite="true").status_code == 201


def test_open_with_offset_and_length(api: Any) -> None:
    _create(api, "/f", b"0123456789")
    answer = api("GET", "/f", "OPEN", params={"offset": "3", "length": "4"})
    assert answer.status_code == 200
    assert answer.content == b"3456"
    assert answer.history and answer.history[0].status_code == 307


def test_append_is_two_steps(api: Any) -> None:
    _create(api, "/f", b"abc")
    step1 = api("POST", "/f", "APPEND", allow_redirects=False)
    assert step1.status_code == 307
    assert requests.post(step1.headers["Location"], data=b"def", timeout=30).status_code == 200
    assert api("GET", "/f", "OPEN").content == b"abcdef"


def test_missing_file_is_a_remote_exception(api: Any) -> None:
    answer = api("GET", "/missing", "GETFILESTATUS")
    assert answer.status_code == 404
    remote = answer.json()["RemoteException"]
    assert remote["exception"] == "FileNotFoundException"
    assert remote["javaClassName"] == "java.io.FileNotFoundException"
    assert "/missing" in remote["message"]


def test_rename_answers_false_when_the_target_exists(api: Any) -> None:
    _create(api, "/a", b"a")
    _create(api, "/b", b"b")
    answer = api("PUT", "/a", "RENAME", params={"destination": f"{api.root}/b"})
    assert answer.status_code == 200 and answer.json() == {"boolean": False}
    assert api("GET", "/b", "OPEN").content == b"b"
    answer = api("PUT", "/a", "RENAME", params={"destination": f"{api.root}/c"})
    assert answer.json() == {"boolean": True}
    assert api("GET", "/c", "OPEN").content == b"a"


def test_liststatus_shapes(api: Any) -> None:
    _create(api, "/d/x", b"12")
    api("PUT", "/d/sub", "MKDIRS")
    listing = api("GET", "/d", "LISTSTATUS").json()["FileStatuses"]["FileStatus"]
    assert [(s["pathSuffix"], s["type"]) for s in listing] == [
        ("sub", "DIRECTORY"),
        ("x", "FILE"),
    ]
    on_file = api("GET", "/d/x", "LISTSTATUS").json()["FileStatuses"]["FileStatus"]
    assert [(s["pathSuffix"], s["length"]) for s in on_file] == [("", 2)]


def test_delete_recursive_and_not(api: Any) -> None:
    _create(api, "/d/x", b"1")
    refused = api("DELETE", "/d", "DELETE", params={"recursive": "false"})
    assert refused.status_code == 403
    assert "PathIsNotEmptyDirectoryException" in refused.json()["RemoteException"]["exception"]
    assert api("DELETE", "/d", "DELETE", params={"recursive": "true"}).json() == {"boolean": True}
    assert api("DELETE", "/d", "DELETE").json() == {"boolean": False}


def test_unknown_operation_is_a_bad_request(api: Any) -> None:
    answer = api("GET", "/", "NOSUCHOP")
    assert answer.status_code == 400
    assert answer.json()["RemoteException"]["exception"] == "IllegalArgumentException"
