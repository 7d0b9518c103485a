"""A small client of the coordinator's HTTP API (docs/api.md), for the pipeline and the CLI.

It follows the leader across failover (redirects, then the other addresses) and retries
idempotent calls. Uses httpx only: no kazoo, no pyspark, no click.
"""

from sparkpoint.client.client import CoordinatorClient, state_to_dict
from sparkpoint.client.credentials import Credentials, read_token_file
from sparkpoint.client.errors import (
    ClientError,
    Conflict,
    Invalid,
    NotFound,
    Refused,
    Superseded,
    Unavailable,
)
from sparkpoint.client.models import Heartbeat, RestoreResponse

__all__ = [
    "ClientError",
    "Conflict",
    "CoordinatorClient",
    "Credentials",
    "Heartbeat",
    "Invalid",
    "NotFound",
    "Refused",
    "RestoreResponse",
    "Superseded",
    "Unavailable",
    "read_token_file",
    "state_to_dict",
]
