"""Storage URIs: accepted spellings, normalisation, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.storage import PathOutsideRoot, StorageError
from sparkpoint.storage.uri import parse


@pytest.mark.parametrize(
    ("given", "spelled"),
    [
        ("/data/ckpt/", "/data/ckpt"),
        ("/data//ckpt/./job", "/data/ckpt/job"),
        ("file:///data/ckpt", "file:///data/ckpt"),
        ("file:/data/ckpt", "file:///data/ckpt"),
        ("file://localhost/data", "file:///data"),
        ("hdfs://nn:8020/ckpt/", "hdfs://nn:8020/ckpt"),
        ("HDFS://nn:8020/", "hdfs://nn:8020/"),
        ("webhdfs://nn:9870/a/b", "webhdfs://nn:9870/a/b"),
    ],
)
def test_spellings(given: str, spelled: str) -> None:
    assert str(parse(given)) == spelled


def test_relative_plain_paths_become_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert str(parse("ckpt/x")) == f"{tmp_path}/ckpt/x"


@pytest.mark.parametrize(
    "bad", ["/a/../b", "..", "hdfs://nn:8020/a/..", "file:///x/../../etc", "a/../../b"]
)
def test_dot_dot_is_refused(bad: str) -> None:
    with pytest.raises(PathOutsideRoot, match=r"'\.\.' segment"):
        parse(bad)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("", "empty"),
        ("s3://bucket/x", "unsupported scheme 's3'"),
        ("hdfs:///x", "names no namenode"),
        ("file://otherhost/x", "remote host"),
        ("/a\x00b", "NUL"),
    ],
)
def test_refused(bad: str, reason: str) -> None:
    with pytest.raises(StorageError, match=reason):
        parse(bad)


def test_is_under() -> None:
    root = parse("hdfs://nn:8020/ckpt")
    assert parse("hdfs://nn:8020/ckpt/job/chk-1").is_under(root)
    assert parse("hdfs://nn:8020/ckpt").is_under(root)
    assert not parse("hdfs://nn:8020/ckpt-other/x").is_under(root)
    assert not parse("hdfs://other:8020/ckpt/x").is_under(root)
    assert parse("file:///data/x").is_under(parse("/data"))


def test_child_must_be_one_segment() -> None:
    with pytest.raises(PathOutsideRoot):
        parse("/data").child("a/b")
    with pytest.raises(PathOutsideRoot):
        parse("/data").child("..")
