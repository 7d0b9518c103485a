"""The CheckpointIDCounter seam (after Flink's interface of the same name)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sparkpoint.checkpoint import JobStatus

#: The first id a fresh counter hands out.
INITIAL_CHECKPOINT_ID = 1


@runtime_checkable
class CheckpointIDCounter(Protocol):
    """Hands out checkpoint ids: unique and strictly rising across leaders, never reused.

    ``get_and_increment`` returns the current value and advances it by one; ``get`` reads
    the next value without advancing; ``set_count`` moves it (after a restore, to just
    above the restored id). ``shutdown`` removes the counter only when ``job_status`` is
    globally terminal, so a new leader continues where the old one stopped.
    """

    def start(self) -> None: ...

    def shutdown(self, job_status: JobStatus) -> None: ...

    def get_and_increment(self) -> int: ...

    def get(self) -> int: ...

    def set_count(self, new_count: int) -> None: ...
