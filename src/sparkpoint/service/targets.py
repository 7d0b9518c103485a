"""Where a savepoint may be written: under ``state.savepoints.allowed-dirs`` only.

A savepoint writes a directory of files wherever its caller says; without a rule, anyone
allowed to trigger one could make the coordinator write (as its own user) anywhere it can.
The check is made before anything is triggered, so a refused target is never touched.

>>> check_savepoint_target("/data/savepoints/nightly", ("/data/savepoints",))
>>> check_savepoint_target("/data/savepoints/../etc", ("/data/savepoints",))
Traceback (most recent call last):
...
sparkpoint.runs.errors.SavepointTargetError: ... '..' segments are not allowed (...)
"""

from __future__ import annotations

import os

from sparkpoint import metrics
from sparkpoint.runs.errors import SavepointTargetError
from sparkpoint.storage import StorageError
from sparkpoint.storage.uri import LOCAL_SCHEMES, Uri, parse

RULE = "state.savepoints.allowed-dirs"


def _refuse(target: str, why: str) -> SavepointTargetError:
    metrics.REST_REFUSALS.labels("savepoint_target").inc()
    return SavepointTargetError(f"savepoint target_dir {target!r} refused: {why} ({RULE})")


def _real(uri: Uri) -> str:
    """The local path with every symlink resolved (missing parts kept as written)."""
    return os.path.realpath(uri.path)


def check_savepoint_target(target: str | None, roots: tuple[str, ...]) -> None:
    """Raise :class:`SavepointTargetError` unless ``target`` (None: the configured savepoint
    directory, always allowed) lies under one of ``roots``."""
    if not target:
        return
    if ".." in target.replace("\\", "/").split("/"):
        raise _refuse(target, "'..' segments are not allowed")
    if not roots:
        raise _refuse(target, "no allowed savepoint directory is configured")
    try:
        wanted = parse(target)
    except StorageError as exc:
        raise _refuse(target, str(exc)) from None
    for root_text in roots:
        root = parse(root_text)
        if not wanted.is_under(root):
            continue
        if wanted.scheme not in LOCAL_SCHEMES:
            return
        # A symlink below the root may point anywhere: compare where the paths lead.
        real_root = _real(root)
        real = _real(wanted)
        if real == real_root or real.startswith(real_root.rstrip("/") + "/"):
            return
        raise _refuse(target, f"it resolves through a symlink to {real!r}, outside {root_text}")
    raise _refuse(target, f"not under an allowed directory ({', '.join(roots)})")
