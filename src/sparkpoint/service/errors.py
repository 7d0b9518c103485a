"""Why the service refuses a request, beyond what the coordinator itself refuses."""

from __future__ import annotations


class ServiceError(Exception):
    """Base: ``code`` is the machine-readable error of the API reply."""

    code = "error"
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownJobError(ServiceError):
    code, status = "unknown_job", 404


class UnknownCheckpointIdError(ServiceError):
    code, status = "unknown_checkpoint", 404


class JobGraphConflictError(ServiceError):
    code, status = "job_graph_conflict", 409


class InvalidRequestError(ServiceError):
    code, status = "invalid_request", 422


class NotLeaderError(ServiceError):
    """This replica does not act as leader now. ``leader_address``: where to redirect
    (None: no leader is known, answer 503)."""

    code, status = "no_leader", 503

    def __init__(self, message: str, *, leader_address: str | None = None, code: str = "") -> None:
        super().__init__(message)
        self.leader_address = leader_address
        if code:
            self.code = code


class LeadershipLostError(ServiceError):
    """A coordination error (fenced, disconnected, in doubt) ended this replica's term
    while the request was handled."""

    code, status = "leadership_lost", 503
