"""Writes helm/sparkpoint/README.md from the chart's values.yaml: one row per value, its
default and the comment written above it (or after it) in values.yaml.

    .venv/bin/python scripts/chart_readme.py          # rewrite the README
    .venv/bin/python scripts/chart_readme.py --check  # exit 1 if it is out of date
    (--chart DIR: another chart directory)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "helm" / "sparkpoint"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")
_HEADER = """# The sparkpoint Helm chart

Coordinator replicas of sparkpoint: highly available checkpoints for stateful PySpark
pipelines, coordinated through an existing ZooKeeper ensemble. Deploying step by step:
docs/kubernetes.md; operating (runbooks, upgrades): docs/operations.md.

```sh
helm install sp helm/sparkpoint -n streaming -f values.yaml
helm test sp -n streaming
```

## Values

Generated from the comments in `values.yaml` by `scripts/chart_readme.py`; edit those.

| key | default | description |
| --- | --- | --- |
"""


def _lookup(values: Any, path: list[str]) -> Any:
    for part in path:
        values = values[part]
    return values


def rows(text: str) -> list[tuple[str, str, str]]:
    values = yaml.safe_load(text)
    found: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if not match or not stripped:
            comment = []
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = [k for _, k in stack] + [match["key"]]
        stack.append((indent, match["key"]))
        rest = match["rest"]
        inline = rest.split(" #", 1)[1].strip() if " #" in rest else ""
        description = " ".join(c for c in [*comment, inline] if c)
        comment = []
        try:
            default = _lookup(values, path)
        except (KeyError, TypeError):
            continue  # a key inside a list item
        if isinstance(default, dict) and default:
            if description:
                found.append((".".join(path), "", description))
            continue
        found.append((".".join(path), f"`{json.dumps(default)}`", description))
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(chart: Path = CHART) -> str:
    table = "".join(
        f"| `{key}` | {default} | {_cell(description)} |\n"
        for key, default, description in rows((chart / "values.yaml").read_text())
    )
    return _HEADER + table


def main(argv: list[str]) -> int:
    chart = Path(argv[argv.index("--chart") + 1]) if "--chart" in argv else CHART
    readme = chart / "README.md"
    text = render(chart)
    if "--check" in argv:
        if not readme.exists() or readme.read_text() != text:
            print(f"{readme} is out of date: run scripts/chart_readme.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
