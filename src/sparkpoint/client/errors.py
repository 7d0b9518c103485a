"""What the client raises: one type per kind of answer a caller acts on differently."""

from __future__ import annotations


class ClientError(Exception):
    """The coordinator refused a request (``status``, machine ``code``, human ``message``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class NotFound(ClientError):
    """404: unknown job or checkpoint."""


class Conflict(ClientError):
    """409: the checkpoint finished, the ack is a duplicate, the graph conflicts, …"""


class Superseded(Conflict):
    """409 ``run_superseded``: this driver run is no longer the job's current one (a newer
    run registered); the message names both runs. The driver must stop."""


class Invalid(ClientError):
    """422 (or another 4xx): the request is malformed or names something not awaited."""


class Refused(ClientError):
    """401 (no accepted token) or 403 (the token's role may not make this call)."""


class Unavailable(ClientError):
    """No leader answered within ``retry_for_s`` (none elected, or none reachable)."""


_BY_STATUS: dict[int, type[ClientError]] = {
    401: Refused, 403: Refused, 404: NotFound, 409: Conflict, 503: Unavailable,
}  # fmt: skip


def error_for(status: int, code: str, message: str) -> ClientError:
    if status == 409 and code == "run_superseded":
        return Superseded(status, code, message)
    if status in _BY_STATUS:
        return _BY_STATUS[status](status, code, message)
    if 400 <= status < 500:
        return Invalid(status, code, message)
    return ClientError(status, code, message)
