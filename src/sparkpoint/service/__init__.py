"""The coordinator service: replicas with leadership gating, job sessions, the REST API.

``start_service(config)`` starts one replica in this process; ``run(config)`` is the
``sparkpoint coordinator run`` entry point. Both are imported on first use, so reading
status (``service.status``, ``service.backend``) does not load the HTTP server stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkpoint.service.process import Service, run, start_service
    from sparkpoint.service.replica import Replica

__all__ = ["Replica", "Service", "run", "start_service"]


def __getattr__(name: str) -> Any:
    if name in {"Service", "run", "start_service"}:
        from sparkpoint.service import process

        return getattr(process, name)
    if name == "Replica":
        from sparkpoint.service.replica import Replica

        return Replica
    raise AttributeError(name)
