"""The service and the client keep to their side of the package boundaries (docs/architecture.md
§2): no kazoo outside ha/counter/store, click only in ops/cli, no pyspark."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "sparkpoint"


def imported_roots(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (SRC / package).rglob("*.py"):
        tree = ast.parse(path.read_text())
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(SRC))] = names
    return found


def test_service_and_client_import_no_kazoo_click_or_pyspark() -> None:
    for package in ("service", "client"):
        for module, names in imported_roots(package).items():
            roots = {n.split(".")[0] for n in names}
            assert not roots & {"kazoo", "click", "pyspark", "hdfs"}, (module, roots)


def test_client_imports_nothing_of_the_service_side() -> None:
    forbidden = ("sparkpoint.service", "sparkpoint.ha", "sparkpoint.store", "sparkpoint.counter")
    for module, names in imported_roots("client").items():
        assert not [n for n in names if n.startswith(forbidden)], module
