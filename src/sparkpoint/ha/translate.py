"""The one place where kazoo's exceptions become sparkpoint's (see ``ha.errors``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError

from sparkpoint.ha.errors import ConflictError, HAError, NotConnectedError, PossiblyAppliedError

# Errors after which a write may or may not have reached the server.
_IN_DOUBT = (
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
    RetryFailedError,
    KazooTimeoutError,
)


@contextmanager
def reads(what: str) -> Iterator[None]:
    """Translate failures of a read (or a retried idempotent call)."""
    try:
        yield
    except (*_IN_DOUBT, ConnectionClosedError) as exc:
        raise NotConnectedError(f"{what}: ZooKeeper unreachable ({type(exc).__name__})") from exc
    except KazooException as exc:
        raise HAError(f"{what}: {type(exc).__name__} {exc}") from exc


@contextmanager
def writes(what: str) -> Iterator[None]:
    """Translate failures of a single, non-retried write.

    Refused (nothing written) only when ZooKeeper said so in a reply, or when the client
    refused before sending; every other failure leaves the write in doubt.
    """
    try:
        yield
    except ConnectionClosedError as exc:
        # The client is closed and refused before sending anything.
        raise NotConnectedError(f"{what}: not connected to ZooKeeper") from exc
    except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError) as exc:
        raise ConflictError(f"{what}: {type(exc).__name__}") from exc
    except (*_IN_DOUBT, KazooException) as exc:
        if isinstance(exc, ZookeeperError) and not isinstance(exc, _IN_DOUBT):
            # Any other error code is the server's reply: refused.
            raise HAError(f"{what}: {type(exc).__name__} {exc}") from exc
        raise PossiblyAppliedError(
            f"{what}: connection dropped mid-write ({type(exc).__name__}); it may or may not "
            "have been applied"
        ) from exc
