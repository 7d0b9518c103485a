"""Module boundaries of docs/architecture.md §2 for metadata and storage, and their faces."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "sparkpoint"


def _imports(package: str) -> set[str]:
    found = set()
    for path in (SRC / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
    return found


def _internal(modules: set[str]) -> set[str]:
    return {m.split(".")[1] for m in modules if m.startswith("sparkpoint.")}


def test_metadata_imports_only_the_domain_model_and_the_standard_library() -> None:
    imports = _imports("metadata")
    assert _internal(imports) <= {"checkpoint", "metadata"}
    third_party = {m.split(".")[0] for m in imports} - {"sparkpoint", "__future__"}
    assert third_party <= set(sys.stdlib_module_names), third_party


def test_storage_depends_only_on_metadata_and_checkpoint() -> None:
    assert _internal(_imports("storage")) <= {"checkpoint", "metadata", "storage"}


def test_only_the_webhdfs_module_imports_hdfs() -> None:
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        uses_hdfs = any(n == "hdfs" or n.startswith("hdfs.") for n in names)
        assert not uses_hdfs or path == SRC / "storage" / "webhdfs.py", path


@pytest.mark.parametrize("package", ["sparkpoint.metadata", "sparkpoint.storage"])
def test_public_names_exist(package: str) -> None:
    module = importlib.import_module(package)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name
