"""The Python blocks of README.md and docs/: each is Python that parses, and every name it
imports exists, so the docs cannot drift from the code (a renamed or private name fails
here). Blocks that only list signatures are fenced as ``text``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


BLOCKS = python_blocks()


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 10, BLOCKS


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_a_docs_block_parses_and_its_imports_run(where: str, code: str) -> None:
    tree = ast.parse(code, filename=where)
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    exec(compile(ast.Module(body=imports, type_ignores=[]), where, "exec"), {})


def test_the_public_door_exports_what_the_docs_import_from_it() -> None:
    import sparkpoint.pipeline as door

    imported = {
        alias.name
        for _, code in BLOCKS
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.ImportFrom) and node.module == "sparkpoint.pipeline"
        for alias in node.names
    }
    assert imported, "no block imports from sparkpoint.pipeline"
    assert imported <= set(door.__all__), imported - set(door.__all__)
    for name in door.__all__:
        assert getattr(door, name) is not None, name
