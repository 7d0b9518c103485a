"""Where the pinned tools the project fetches or builds are cached (JVM artifacts from
Maven Central, Rust tools from crates.io), and the lock that lets one process at a time
fill an entry."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def cache_root(env: str, kind: str) -> Path:
    """``$env`` if set, else ``$XDG_CACHE_HOME/sparkpoint/<kind>`` (``~/.cache`` without
    XDG_CACHE_HOME)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sparkpoint" / kind


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
