"""The FileSystem contract, run against the local disk and against the suite's real HDFS
(a NameNode and DataNodes from Hadoop's jars, over WebHDFS)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from sparkpoint.storage import (
    FileAlreadyExists,
    FileNotFound,
    FileSystem,
    PathOutsideRoot,
    StorageError,
    filesystem_for,
)


@pytest.fixture
def fs(base_dir: str, fs_options: dict[str, Any]) -> FileSystem:
    return filesystem_for(base_dir, **fs_options)


def test_is_a_filesystem(fs: FileSystem) -> None:
    assert isinstance(fs, FileSystem)


def test_create_exclusive_refuses_an_existing_file(fs: FileSystem, base_dir: str) -> None:
    path = f"{base_dir}/a/b/state"
    fs.create_exclusive(path, b"first")  # parents are created
    with pytest.raises(FileAlreadyExists) as caught:
        fs.create_exclusive(path, b"second")
    assert path in str(caught.value)
    assert fs.read(path) == b"first"


def test_streamed_create(fs: FileSystem, base_dir: str) -> None:
    path = f"{base_dir}/streamed"
    out = fs.create(path)
    for i in range(100):
        out.write(bytes([i]) * 1000)
    out.close()
    assert fs.status(path).size == 100_000
    assert fs.read_range(path, 99_000, 1000) == bytes([99]) * 1000


def test_streamed_create_into_a_taken_name_fails_and_keeps_the_original(
    fs: FileSystem, base_dir: str
) -> None:
    path = f"{base_dir}/taken"
    fs.create_exclusive(path, b"original")
    with pytest.raises(FileAlreadyExists):
        out = fs.create(path)
        out.write(b"intruder")
        out.close()
    assert fs.read(path) == b"original"


def test_aborted_create_leaves_nothing(fs: FileSystem, base_dir: str) -> None:
    out = fs.create(f"{base_dir}/aborted")
    out.write(b"half")
    out.abort()
    assert not fs.exists(f"{base_dir}/aborted")


def test_write_atomic_never_replaces_and_leaves_no_temporary_files(
    fs: FileSystem, base_dir: str
) -> None:
    path = f"{base_dir}/_metadata"
    fs.write_atomic(path, b"one")
    with pytest.raises(FileAlreadyExists):
        fs.write_atomic(path, b"two")
    assert fs.read(path) == b"one"
    assert [s.name for s in fs.list(base_dir)] == ["_metadata"]


def test_rename(fs: FileSystem, base_dir: str) -> None:
    fs.create_exclusive(f"{base_dir}/src", b"s")
    fs.create_exclusive(f"{base_dir}/other", b"o")
    with pytest.raises(FileAlreadyExists):
        fs.rename(f"{base_dir}/src", f"{base_dir}/other")
    assert fs.read(f"{base_dir}/other") == b"o"
    fs.rename(f"{base_dir}/src", f"{base_dir}/dst")
    assert not fs.exists(f"{base_dir}/src")
    assert fs.read(f"{base_dir}/dst") == b"s"
    with pytest.raises(FileNotFound):
        fs.rename(f"{base_dir}/src", f"{base_dir}/again")


def test_rename_directory(fs: FileSystem, base_dir: str) -> None:
    fs.create_exclusive(f"{base_dir}/d1/f", b"x")
    fs.rename(f"{base_dir}/d1", f"{base_dir}/d2")
    assert fs.read(f"{base_dir}/d2/f") == b"x"
    assert not fs.exists(f"{base_dir}/d1")


def test_read_range(fs: FileSystem, base_dir: str) -> None:
    path = f"{base_dir}/ranges"
    data = bytes(range(256)) * 40
    fs.create_exclusive(path, data)
    assert fs.read_range(path, 0, 10) == data[:10]
    assert fs.read_range(path, 1000, 500) == data[1000:1500]
    assert fs.read_range(path, len(data) - 3, 100) == data[-3:]  # short at the end
    assert fs.read_range(path, len(data), 10) == b""
    assert fs.read_range(path, 5, 0) == b""
    with pytest.raises(FileNotFound):
        fs.read_range(f"{base_dir}/missing", 0, 1)
    with pytest.raises(ValueError, match="negative"):
        fs.read_range(path, -1, 1)


def test_open_read_streams(fs: FileSystem, base_dir: str) -> None:
    path = f"{base_dir}/stream"
    data = b"0123456789" * 10_000
    fs.create_exclusive(path, data)
    with fs.open_read(path) as f:
        chunks = []
        while chunk := f.read(4096):
            chunks.append(chunk)
    assert b"".join(chunks) == data
    with pytest.raises(FileNotFound):
        fs.open_read(f"{base_dir}/missing").__enter__()


def test_status_and_list(fs: FileSystem, base_dir: str) -> None:
    fs.create_exclusive(f"{base_dir}/b", b"12345")
    fs.mkdirs(f"{base_dir}/a/deeper")
    entries = fs.list(base_dir)
    assert [(e.name, e.is_dir, e.size) for e in entries] == [("a", True, 0), ("b", False, 5)]
    assert entries[1].path.rstrip("/").endswith("/b")
    status = fs.status(f"{base_dir}/b")
    assert (status.is_dir, status.size) == (False, 5)
    assert status.modification_time_ms > 0
    assert fs.list(f"{base_dir}/a/deeper") == []
    with pytest.raises(FileNotFound) as caught:
        fs.status(f"{base_dir}/nope")
    assert f"{base_dir}/nope" in str(caught.value)
    with pytest.raises(FileNotFound):
        fs.list(f"{base_dir}/nope")
    assert fs.exists(f"{base_dir}/b") and not fs.exists(f"{base_dir}/nope")


def test_list_of_a_file_is_an_error(fs: FileSystem, base_dir: str) -> None:
    fs.create_exclusive(f"{base_dir}/file", b"x")
    with pytest.raises(StorageError):
        fs.list(f"{base_dir}/file")


def test_delete(fs: FileSystem, base_dir: str) -> None:
    fs.create_exclusive(f"{base_dir}/d/e/f", b"x")
    assert fs.delete(f"{base_dir}/d/e/f") is True
    assert fs.delete(f"{base_dir}/d/e/f") is False
    fs.create_exclusive(f"{base_dir}/d/e/g", b"x")
    with pytest.raises(StorageError):
        fs.delete(f"{base_dir}/d")  # not empty, not recursive
    assert fs.exists(f"{base_dir}/d/e/g")
    assert fs.delete(f"{base_dir}/d", recursive=True) is True
    assert not fs.exists(f"{base_dir}/d")


def test_mkdirs_is_idempotent(fs: FileSystem, base_dir: str) -> None:
    fs.mkdirs(f"{base_dir}/x/y/z")
    fs.mkdirs(f"{base_dir}/x/y/z")
    assert fs.status(f"{base_dir}/x/y").is_dir


def test_dot_dot_is_refused_everywhere(fs: FileSystem, base_dir: str) -> None:
    sneaky = f"{base_dir}/a/../../escape"
    for attempt in (
        lambda: fs.read(sneaky),
        lambda: fs.create_exclusive(sneaky, b"x"),
        lambda: fs.write_atomic(sneaky, b"x"),
        lambda: fs.delete(sneaky, recursive=True),
        lambda: fs.mkdirs(sneaky),
        lambda: fs.rename(f"{base_dir}/a", sneaky),
    ):
        with pytest.raises(PathOutsideRoot, match=r"'\.\.'"):
            attempt()
    assert fs.list(base_dir) == []


def test_survives_pickling_after_use(fs: FileSystem, base_dir: str) -> None:
    fs.create_exclusive(f"{base_dir}/before", b"1")
    copy = pickle.loads(pickle.dumps(fs))
    copy.create_exclusive(f"{base_dir}/after", b"2")
    assert fs.read(f"{base_dir}/after") == b"2"
