"""A virtualenv as a user makes one for a pipeline (docs/production.md): sparkpoint
installed from this checkout as a package (not editable: venv-pack refuses editable
installs), with uv from its cache, hard-linked, so it takes seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def uv(*args: str, venv: Path | None = None, timeout: float = 600) -> None:
    env = {**os.environ, "UV_LINK_MODE": "hardlink"}
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
    done = subprocess.run(
        ["uv", *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout}{done.stderr}"


def pipeline_venv(venv: Path, *requirements: str, no_deps: bool = False) -> Path:
    """A new virtualenv at ``venv`` of this Python with ``requirements`` installed
    (``"."``: this checkout's sparkpoint; ``".[pipeline]"``: with the runtime's extras)."""
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    targets = [str(ROOT) + r[1:] if r.startswith(".") else r for r in requirements]
    uv("pip", "install", "--quiet", "--offline", *(["--no-deps"] if no_deps else []),
       *targets, venv=venv)  # fmt: skip
    return venv
