"""What the driver's loop has done so far, for progress displays and tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Rescaled:
    """A live rescale that took effect: from parallelism ``before`` to ``after``, after
    epoch ``epoch``, from checkpoint ``checkpoint_id`` (taken at that epoch's end)."""

    before: int
    after: int
    epoch: int
    checkpoint_id: int


@dataclass
class DriverStatus:
    """What the loop has done so far (for progress displays and tests)."""

    epoch: int = 0
    records: int = 0
    started: float = field(default_factory=time.monotonic)
    restored_from: int | None = None
    last_completed: int | None = None
    completed: list[int] = field(default_factory=list)
    aborted: list[tuple[int, str]] = field(default_factory=list)
    acknowledged: list[int] = field(default_factory=list)
    declined: list[tuple[int, str]] = field(default_factory=list)
    savepoints: dict[int, str] = field(default_factory=dict)
    finished: bool = False
    #: This run's id, as the coordinator issued it at registration.
    run_id: str | None = None
    #: Why the coordinator refused this run (a newer run registered); the loop stopped.
    superseded: str | None = None
    #: The pipeline's event-time watermark after the last epoch (None: no event time).
    watermark: int | None = None
    #: The live rescales of this driver, in order (``PipelineDriver.rescale``).
    rescales: list[Rescaled] = field(default_factory=list)
    #: The parallelism a live rescale under way goes to (None: none under way).
    rescaling: int | None = None

    @property
    def records_per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.records / elapsed if elapsed > 0 else 0.0
