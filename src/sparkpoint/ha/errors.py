"""sparkpoint's own exceptions for coordination failures.

`ha` translates kazoo's exceptions into these in one place; `counter`, `store` and the
service see only these.
"""

from __future__ import annotations


class HAError(Exception):
    """Base of every coordination error."""


class NotConnectedError(HAError):
    """ZooKeeper is unreachable (SUSPENDED or LOST); nothing was written."""


class FencedError(HAError):
    """A fenced write was refused because the leader term moved on: this process is no
    longer the leader and must stop acting. Nothing was written."""

    def __init__(self, message: str, *, expected_epoch: int, current_epoch: int | None) -> None:
        super().__init__(message)
        self.expected_epoch = expected_epoch
        self.current_epoch = current_epoch


class PossiblyAppliedError(HAError):
    """The connection dropped while a write was in flight: it may or may not have been
    applied. Re-read (the znode, its version, the epoch) before retrying or reporting."""


class ConflictError(HAError):
    """A compare-and-set lost against a concurrent writer (a znode version moved or a node
    that should not exist does). Safe to re-read and retry."""
