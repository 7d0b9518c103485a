"""The package boundaries of docs/architecture.md §2, over every module of src/sparkpoint.

The four rules on third-party libraries (only `pipeline` — and the example jobs — imports
pyspark, only `ha`/`counter`/`store` import kazoo, only `storage` imports hdfs, only
`ops/cli` imports click), and the import graph between sparkpoint's own packages: every
import goes where §2's table allows it, so nothing imports "up" and no two packages import
each other, even through others. Imports inside functions count too: a lazy import is still
a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "sparkpoint"

#: The operator's tools, gathered under sparkpoint.ops: each may import the whole runtime
#: and the tools listed here, never one above it.
OPS = {
    "ops.devcluster": set(),
    "ops.drills": {"ops.devcluster"},
    "ops.demo": {"ops.drills", "ops.devcluster"},
    "ops.cli": {"ops.demo", "ops.drills", "ops.devcluster"},
}

#: The runtime's packages and what each may import: the "may import" column of §2.
#: `metrics`, `liveness` and the root package (its version) are leaves anyone imports.
RUNTIME: dict[str, set[str]] = {
    "checkpoint": set(),
    "config": set(),
    "metrics": set(),
    "liveness": set(),
    "metadata": {"checkpoint"},
    "statefiles": {"checkpoint"},
    "storage": {"checkpoint", "metadata"},
    "ha": {"config", "liveness", "checkpoint"},
    "counter": {"ha", "checkpoint"},
    "store": {"ha", "config", "checkpoint"},
    "coordinator": {"counter", "store", "storage", "ha", "config", "checkpoint"},
    "recovery": {"statefiles", "metadata", "storage", "store", "checkpoint"},
    "runs": {"coordinator", "recovery", "storage", "store", "counter", "config", "checkpoint"},
    "client": {"runs", "recovery", "checkpoint"},
    "pipeline": {
        "client",
        "runs",
        "coordinator",
        "counter",
        "store",
        "recovery",
        "statefiles",
        "storage",
        "checkpoint",
    },
    # Example jobs: pipelines as users write them, against the public door (and PySpark
    # where a stage is a DataFrame).
    "examples": {"pipeline"},
}
RUNTIME["service"] = set(RUNTIME) - {"service", "client", "pipeline", "examples"}
LEAVES = {"sparkpoint", "metrics", "liveness"}
ALLOWED = RUNTIME | {name: set(RUNTIME) | below for name, below in OPS.items()}


def package_of(module: str) -> str | None:
    """The §2 package of a dotted module name inside sparkpoint (``ops.<tool>`` for the
    operator's tools), ``sparkpoint`` for the root package, None outside sparkpoint."""
    parts = module.split(".")
    if parts[0] != "sparkpoint":
        return None
    if len(parts) == 1 or parts[1].startswith("__"):
        return "sparkpoint"
    if parts[1] == "ops" and len(parts) > 2:
        return f"ops.{parts[2]}"
    return parts[1]


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC.parent).with_suffix("")
        yield ".".join(relative.parts).removesuffix(".__init__"), path


def imported(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, anywhere in it (``from sparkpoint
    import x`` counts as ``sparkpoint.x``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module == "sparkpoint":
                names.update(f"sparkpoint.{alias.name}" for alias in node.names)
    return names


def package_graph() -> dict[str, dict[str, set[str]]]:
    """importer package -> imported package -> the importing modules."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, path in modules():
        importer = package_of(module)
        if importer in (None, "sparkpoint"):
            continue  # the version, and `python -m sparkpoint` (the CLI's entry point)
        for name in imported(path):
            target = package_of(name)
            if target in (None, importer):
                continue
            graph.setdefault(importer, {}).setdefault(target, set()).add(module)
    return graph


def test_every_package_is_in_the_table() -> None:
    found = {package_of(module) for module, _ in modules()} - {"sparkpoint", "ops"}
    assert found == set(ALLOWED), found ^ set(ALLOWED)
    table = (ROOT / "docs" / "architecture.md").read_text().split("## 2.")[1].split("## 3.")[0]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines() if "| `" in line}
    assert {name.replace(".", "/") for name in ALLOWED} <= rows


def test_no_package_imports_up() -> None:
    wrong = [
        f"{', '.join(sorted(importers))} imports {target}"
        for importer, targets in package_graph().items()
        for target, importers in targets.items()
        if target not in ALLOWED[importer] | LEAVES
    ]
    assert not wrong, "\n".join(wrong)


def test_the_packages_import_each_other_in_no_cycle() -> None:
    """Peel off packages that import none of the rest, then those none of the rest import:
    whatever remains lies on a cycle."""
    graph = {p: set(t) - LEAVES for p, t in package_graph().items()}
    remaining = {p: targets & set(graph) for p, targets in graph.items()}
    while True:
        imported_by_rest = set().union(*remaining.values())
        peel = {p for p, targets in remaining.items() if not targets} | (
            set(remaining) - imported_by_rest
        )
        if not peel:
            break
        remaining = {p: t - peel for p, t in remaining.items() if p not in peel}
    assert not remaining, f"import cycle among {sorted(remaining)}"


def test_the_table_itself_has_no_cycle() -> None:
    order: list[str] = []
    pending = {p: set(below) - LEAVES for p, below in ALLOWED.items()}
    while pending:
        bottom = sorted(p for p, below in pending.items() if below <= set(order))
        assert bottom, f"the allowed imports of {sorted(pending)} go round in a cycle"
        order += bottom
        pending = {p: b for p, b in pending.items() if p not in bottom}


@pytest.mark.parametrize(
    ("library", "owners"),
    [
        ("pyspark", {"pipeline", "examples"}),
        ("kazoo", {"ha", "counter", "store"}),
        ("hdfs", {"storage"}),
        ("click", {"ops.cli"}),
    ],
)
def test_a_library_is_imported_only_by_its_owners(library: str, owners: set[str]) -> None:
    users = {
        module
        for module, path in modules()
        if any(name.split(".")[0] == library for name in imported(path))
        and package_of(module) not in owners
    }
    assert not users, f"only {sorted(owners)} may import {library}: {sorted(users)}"
