"""The FastAPI application of a replica: routes, error mapping, body limit."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from sparkpoint import __version__
from sparkpoint.service.api import (
    audit,
    auth,
    driver,
    errors,
    lifecycle,
    orphans,
    rescale,
    status,
    ui_status,
)
from sparkpoint.service.api.limits import MAX_BODY_BYTES, BodyLimit
from sparkpoint.service.replica import Replica
from sparkpoint.service.ui import RetainedCache, mount_static, watch_leadership
from sparkpoint.service.ui.peers import PeerProbe
from sparkpoint.service.ui.progress import ProgressBoard


def create_app(replica: Replica, *, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    app = FastAPI(
        title="sparkpoint coordinator",
        version=__version__,
        description="Checkpoint coordination for PySpark pipelines (docs/api.md).",
        # Every route, whoever adds it, gets these (docs/security.md).
        dependencies=[Depends(audit.note_job), Depends(auth.authorize)],
    )
    app.state.replica = replica
    errors.install(app)
    auth.install(app, replica.config.security)
    app.include_router(driver.router)
    app.include_router(status.router)
    app.include_router(orphans.router)
    app.include_router(lifecycle.router)
    app.include_router(rescale.router)
    app.include_router(status.probes)
    app.include_router(ui_status.router)
    app.state.leadership_history = watch_leadership(replica.backend)
    app.state.peer_probe = PeerProbe()
    app.state.driver_progress = ProgressBoard()
    app.state.ui_retained = RetainedCache(replica.backend)
    mount_static(app)
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(audit.AuditLog)
    return app
