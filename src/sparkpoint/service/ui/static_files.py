"""Serving the UI's files: ``/ui/`` is the page, everything else under it is an asset."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"


def mount_static(app: FastAPI) -> None:
    """Serve the UI at ``/ui/`` (``/ui`` redirects there: Starlette's slash redirect).

    A mount, not a route: the API's per-route dependencies (authentication) do not apply,
    so the page that asks for a token can load without one; what it shows comes from the
    ``/v1`` endpoints, which do check.
    """
    app.mount("/ui", StaticFiles(directory=STATIC_DIR, html=True), name="ui")
