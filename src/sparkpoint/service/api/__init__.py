"""The coordinator's REST API (FastAPI): a thin adapter over the replica."""

from sparkpoint.service.api.app import create_app

__all__ = ["create_app"]
