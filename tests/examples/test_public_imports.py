"""The examples are written the way a user writes a pipeline: against the names
``sparkpoint.pipeline`` exports, never its inner modules."""

import ast
from pathlib import Path

import sparkpoint.examples
import sparkpoint.pipeline

EXAMPLES = Path(sparkpoint.examples.__file__).parent


def _pipeline_imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of every name imported from sparkpoint.pipeline or below."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "sparkpoint.pipeline"
        ):
            found += [(node.lineno, node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, "")
                for a in node.names
                if a.name.startswith("sparkpoint.pipeline")
            ]
    return found


def test_examples_import_only_the_public_names_of_sparkpoint_pipeline() -> None:
    files = sorted(EXAMPLES.rglob("*.py"))
    assert len(files) > 5
    private = [
        f"{path.relative_to(EXAMPLES)}:{line}: {module} {name}".strip()
        for path in files
        for line, module, name in _pipeline_imports(path)
        if module != "sparkpoint.pipeline" or name not in sparkpoint.pipeline.__all__
    ]
    assert private == []


def test_every_public_name_resolves() -> None:
    for name in sparkpoint.pipeline.__all__:
        assert getattr(sparkpoint.pipeline, name) is not None, name
