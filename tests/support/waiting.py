"""Wait on a condition with a deadline — the only way tests synchronise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], *, timeout: float, message: str, interval: float = 0.02
) -> T:
    """Return the first truthy value of ``condition()``; fail with ``message`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for: {message}")
        time.sleep(interval)
