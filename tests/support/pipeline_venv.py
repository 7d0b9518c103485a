"""A virtualenv as a user makes one for a pipeline (docs/production.md): sparkpoint
installed from this checkout as a package (not editable: venv-pack refuses editable
installs) and, with ``extras``, its dependencies at the versions uv.lock pins — by uv,
hard-linked from its cache where ``uv sync`` left the wheels, so it takes seconds. Not
``--offline``: ``uv sync`` installs from the lock's URLs and leaves no index pages in the
cache, which an offline resolution needs (on a fresh machine it found no package at all)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def uv(*args: str, venv: Path | None = None, timeout: float = 600) -> str:
    env = {**os.environ, "UV_LINK_MODE": "hardlink"}
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
    done = subprocess.run(
        ["uv", *args], env=env, capture_output=True, text=True, timeout=timeout, check=False,
        cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def pipeline_venv(venv: Path, *others: str, extras: tuple[str, ...] = ()) -> Path:
    """A new virtualenv at ``venv`` of this Python: sparkpoint, the locked dependencies
    of its base and of ``extras`` (none: sparkpoint alone), and ``others`` as given."""
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    if extras:
        locked = venv.parent / f"{venv.name}-requirements.txt"
        extra_args = [a for e in extras for a in ("--extra", e)]
        uv("export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "--quiet",
           *extra_args, "-o", str(locked))  # fmt: skip
        uv("pip", "install", "--quiet", "--no-deps", "-r", str(locked), venv=venv)
    # A wheel built afresh: uv's cache of a local project is keyed by pyproject.toml, not
    # by src/, so installing the directory could install an older build.
    wheels = venv.parent / f"{venv.name}-wheel"
    uv("build", "--wheel", "--quiet", "-o", str(wheels), str(ROOT))
    [wheel] = wheels.glob("sparkpoint-*.whl")
    uv("pip", "install", "--quiet", "--no-deps", str(wheel), *others, venv=venv)
    return venv
