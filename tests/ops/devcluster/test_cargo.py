"""The Rust tools' cache: where it is, what it refuses, and a binary given instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.ops.devcluster import cargo


def test_the_cache_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cargo.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cargo.cache_root() == tmp_path / "xdg" / "sparkpoint" / "cargo"
    monkeypatch.setenv(cargo.CACHE_ENV, str(tmp_path / "mine"))
    assert cargo.cache_root() == tmp_path / "mine"


def test_an_unknown_tool_and_a_bad_binary_are_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(cargo.CargoToolError, match="unknown Rust tool 'nexmarc'; known: nexmark"):
        cargo.binary("nexmarc")
    not_executable = tmp_path / "nexmark"
    not_executable.write_text("")
    monkeypatch.setenv("SPARKPOINT_NEXMARK_BIN", str(not_executable))
    with pytest.raises(cargo.CargoToolError, match=r"SPARKPOINT_NEXMARK_BIN=.* is not an exec"):
        cargo.binary("nexmark")
    not_executable.chmod(0o755)
    assert cargo.binary("nexmark") == not_executable


def test_a_tool_in_the_cache_is_not_built_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SPARKPOINT_NEXMARK_BIN", raising=False)
    monkeypatch.setenv(cargo.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", "")  # no cargo to build with: only the cache can answer
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "no-cargo"))
    with pytest.raises(cargo.CargoToolError, match="cargo is needed to build nexmark"):
        cargo.binary("nexmark")
    built = tmp_path / "nexmark-0.2.0" / "bin" / "nexmark"
    built.parent.mkdir(parents=True)
    built.write_text("")
    assert cargo.binary("nexmark") == built
