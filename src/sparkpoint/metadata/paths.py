"""Relative file paths in savepoints: written relative to the savepoint directory and
resolved against wherever the `_metadata` is read from, so a savepoint can be moved.

Purely lexical: a path is relative when it has no scheme and does not start with '/'.
"""

from __future__ import annotations


def is_relative(path: str) -> bool:
    return not path.startswith("/") and "://" not in path and not path.startswith("file:")


def relativize(path: str, base: str | None) -> str:
    """``path`` relative to directory ``base`` when it lies under it, else unchanged.

    >>> relativize("hdfs://nn:8020/sp/savepoint-ab-1/op-0-0", "hdfs://nn:8020/sp/savepoint-ab-1")
    'op-0-0'
    """
    if base is None:
        return path
    prefix = base.rstrip("/") + "/"
    if path.startswith(prefix) and len(path) > len(prefix):
        return path[len(prefix) :]
    return path


def unsafe_relative(path: str) -> str | None:
    """Why a relative path may not be resolved (it could escape its directory), or None."""
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return f"relative path {path!r} has an empty, '.' or '..' segment"
    return None


def resolve(path: str, base: str) -> str:
    return base.rstrip("/") + "/" + path
