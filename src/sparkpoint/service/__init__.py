"""The coordinator service: replicas with leadership gating, job sessions, the REST API.

``start_service(config)`` starts one replica in this process; ``run(config)`` is the
``sparkpoint coordinator run`` entry point.
"""

from sparkpoint.service.process import Service, run, start_service
from sparkpoint.service.replica import Replica

__all__ = ["Replica", "Service", "run", "start_service"]
