"""Serving the UI's files: ``/ui/`` is the page, everything else under it is an asset."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"


def mount_static(app: FastAPI) -> None:
    """Serve the UI at ``/ui/``; no authentication, so the token prompt can load."""

    @app.get("/ui", include_in_schema=False)
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    app.mount("/ui", StaticFiles(directory=STATIC_DIR, html=True), name="ui")
