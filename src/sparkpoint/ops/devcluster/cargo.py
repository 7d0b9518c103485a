"""The Rust tools the project runs beside Python: declared here, pinned, built once.

As for the JVM artifacts (jvm.py), every tool is a crate of crates.io at an exact version,
built by ``cargo install --locked`` (the crate's own lock file pins its dependencies) into
a cache directory named after the crate and its version, so a version bump builds anew
and an unchanged tool is never built twice. Nothing binary is kept in the repository. An
environment variable per tool points at an existing binary instead.
``python -m sparkpoint.ops.devcluster.cargo nexmark`` builds one (if needed) and prints
where it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparkpoint.ops.devcluster import tool_cache

CACHE_ENV = "SPARKPOINT_CARGO_CACHE"


class CargoToolError(RuntimeError):
    """A tool is unknown, cargo is missing, or the build failed; the message says which."""


@dataclass(frozen=True)
class Crate:
    name: str
    version: str
    features: tuple[str, ...]
    binary: str
    purpose: str
    binary_env: str  # names an existing binary used instead

    @property
    def directory_name(self) -> str:
        return f"{self.name}-{self.version}"


CRATES: dict[str, Crate] = {
    c.name: c
    for c in (
        Crate(
            name="nexmark",
            version="0.2.0",
            features=("bin",),
            binary="nexmark",
            purpose="the Nexmark event generator (Beam's and Flink's model)",
            binary_env="SPARKPOINT_NEXMARK_BIN",
        ),
    )
}


def cache_root() -> Path:
    return tool_cache.cache_root(CACHE_ENV, "cargo")


def crate(name: str) -> Crate:
    try:
        return CRATES[name]
    except KeyError:
        known = ", ".join(sorted(CRATES))
        raise CargoToolError(f"unknown Rust tool {name!r}; known: {known}") from None


def _rustup_cargo() -> str | None:
    """rustup's cargo, where rustup puts it, when it is not on the PATH."""
    home = os.environ.get("CARGO_HOME") or str(Path.home() / ".cargo")
    cargo = Path(home) / "bin" / "cargo"
    return str(cargo) if os.access(cargo, os.X_OK) else None


def binary(name: str, *, progress: Callable[[str], None] | None = None) -> Path:
    """The executable of tool ``name``, building it first when the cache lacks it.

    Concurrent callers wait on one lock, so a tool is built once; its directory appears
    whole or not at all. cargo itself reads ``CARGO_TARGET_DIR`` (a shared build
    directory) and ``CARGO_HOME`` (the registry) from the environment.
    """
    spec = crate(name)
    given = os.environ.get(spec.binary_env)
    if given:
        if not os.access(given, os.X_OK):
            raise CargoToolError(f"${spec.binary_env}={given} is not an executable file")
        return Path(given)
    target = cache_root() / spec.directory_name
    executable = target / "bin" / spec.binary
    if executable.exists():
        return executable
    target.parent.mkdir(parents=True, exist_ok=True)
    with tool_cache.locked(target.parent / f".{target.name}.lock"):
        if executable.exists():
            return executable
        cargo = shutil.which("cargo") or _rustup_cargo()
        if cargo is None:
            raise CargoToolError(
                f"cargo is needed to build {spec.name} ({spec.purpose}); install Rust "
                f"(apt-get install -y cargo) or point ${spec.binary_env} at a binary"
            )
        say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        say(f"sparkpoint: building {spec.name} {spec.version} from crates.io into {target} (once)")
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{spec.name}-") as tmp:
            command = [
                cargo, "install", spec.name, "--version", f"={spec.version}", "--locked",
                "--features", ",".join(spec.features), "--root", tmp, "--quiet",
            ]  # fmt: skip
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
                raise CargoToolError(f"building {spec.name} with cargo failed:\n{tail}")
            if target.exists():  # a half-built directory from a killed build
                shutil.rmtree(target)
            Path(tmp).rename(target)
            Path(tmp).mkdir()  # for TemporaryDirectory's cleanup
        say(f"sparkpoint: {spec.name} ready ({executable})")
    return executable


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    if not names:
        print(f"usage: python -m sparkpoint.ops.devcluster.cargo {' '.join(CRATES)}")
        return 2
    try:
        for name in names:
            print(binary(name))
    except CargoToolError as e:
        print(f"sparkpoint: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
