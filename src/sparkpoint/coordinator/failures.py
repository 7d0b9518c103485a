"""Tolerable consecutive checkpoint failures (Flink's CheckpointFailureManager, reduced).

Only periodic checkpoints count: a savepoint is requested by a person, who sees its
failure directly, and aborts that are nobody's fault (subsumed by a newer checkpoint, the
coordinator stopping) are not counted at all.
"""

from __future__ import annotations


class FailureCounter:
    """Counts consecutive failures; a completion resets the count."""

    def __init__(self, tolerable: int) -> None:
        self._tolerable = tolerable
        self._consecutive = 0
        self._reason: str | None = None

    @property
    def consecutive(self) -> int:
        return self._consecutive

    @property
    def exceeded_reason(self) -> str | None:
        """Why the job must fail, once more failures than tolerable happened in a row."""
        return self._reason

    def record_failure(self, checkpoint_id: int | None, reason: str) -> bool:
        """Count one failure; return True when this one exceeds the tolerance."""
        self._consecutive += 1
        if self._reason is None and self._consecutive > self._tolerable:
            which = f"checkpoint {checkpoint_id}" if checkpoint_id is not None else "a trigger"
            self._reason = (
                f"exceeded checkpoint tolerable failure threshold ({self._tolerable}): "
                f"{self._consecutive} consecutive failures, the last {which}: {reason}"
            )
            return True
        return False

    def record_success(self) -> None:
        self._consecutive = 0
