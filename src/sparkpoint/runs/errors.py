"""Why a request of a driver or an operator is refused, beyond what the coordinator
itself refuses.

Each has a machine-readable ``code``; which HTTP status it becomes is the REST layer's
business (``service.api.errors``).
"""

from __future__ import annotations


class ServiceError(Exception):
    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownJobError(ServiceError):
    code = "unknown_job"


class UnknownCheckpointIdError(ServiceError):
    code = "unknown_checkpoint"


class JobGraphConflictError(ServiceError):
    code = "job_graph_conflict"


class InvalidRequestError(ServiceError):
    code = "invalid_request"


class JobNotSettledError(ServiceError):
    """A job's earlier coordinator is still publishing a checkpoint; retry shortly."""

    code = "job_not_settled"


class NotLeaderError(ServiceError):
    """This replica does not act as leader now. ``leader_address``: where the leader is
    (None: no leader is known)."""

    code = "no_leader"

    def __init__(self, message: str, *, leader_address: str | None = None, code: str = "") -> None:
        super().__init__(message)
        self.leader_address = leader_address
        if code:
            self.code = code


class SavepointTargetError(InvalidRequestError):
    """A savepoint's ``target_dir`` lies outside ``state.savepoints.allowed-dirs``."""

    code = "savepoint_target_refused"


class InvalidParallelismError(InvalidRequestError):
    """A rescale to a parallelism the job cannot run at (below 1, above its max)."""

    code = "invalid_parallelism"


class JobNotRunningError(ServiceError):
    """The job is over (finished, cancelled, failed): nothing runs to be changed."""

    code = "job_not_running"
