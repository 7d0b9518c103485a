"""The JVM-artifact mechanism: pinned sets, a cache filled once, an installation instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkpoint.ops.cli.main import main
from sparkpoint.ops.devcluster import jvm


def test_an_unknown_set_is_refused_with_the_known_ones() -> None:
    with pytest.raises(jvm.JvmArtifactsError, match=r"unknown JVM artifact set 'nope'.*hadoop"):
        jvm.classpath("nope")
    result = CliRunner().invoke(main, ["jvm", "fetch", "nope"])
    assert result.exit_code == 1
    assert "known: " in result.output and "hadoop" in result.output


def test_an_installation_named_by_its_variable_is_used_instead_of_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(jvm.CACHE_ENV, str(tmp_path / "cache"))
    home = tmp_path / "hadoop"
    (home / "share/hadoop/hdfs").mkdir(parents=True)
    (home / "share/hadoop/hdfs/hadoop-hdfs-9.9.jar").write_bytes(b"PK")
    monkeypatch.setenv("SPARKPOINT_HADOOP_HOME", str(home))
    assert jvm.classpath("hadoop") == [home / "share/hadoop/hdfs/hadoop-hdfs-9.9.jar"]
    assert not (tmp_path / "cache").exists()  # nothing fetched


def test_an_empty_installation_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARKPOINT_HADOOP_HOME", str(tmp_path))
    with pytest.raises(jvm.JvmArtifactsError, match=r"\$SPARKPOINT_HADOOP_HOME=.* holds no jars"):
        jvm.classpath("hadoop")


def test_a_pin_change_moves_the_cache_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    before = jvm.set_directory("hadoop")
    bumped = jvm.ArtifactSet(
        **{**jvm.ARTIFACT_SETS["hadoop"].__dict__, "artifacts": ("org.apache.hadoop:x:0.1",)}
    )
    monkeypatch.setitem(jvm.ARTIFACT_SETS, "hadoop", bumped)
    assert jvm.set_directory("hadoop") != before


def test_list_says_what_is_pinned_and_where(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(main, ["jvm", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert f"org.apache.hadoop:hadoop-hdfs:{jvm.HADOOP_VERSION}" in rows["hadoop"]["artifacts"]
    assert rows["hadoop"]["home_env"] == "SPARKPOINT_HADOOP_HOME"
