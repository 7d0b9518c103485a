"""What recovery refuses, and why, in words an operator can act on."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class RestoreError(Exception):
    """Base of every error recovery raises."""


class RestoreRule(enum.StrEnum):
    """The validation rules of docs/architecture.md §6, by the name errors quote."""

    #: Every operator with state in the checkpoint must exist in the new job graph (by
    #: uid), unless non-restored state is explicitly allowed.
    OPERATOR_MISSING = "operator-missing"
    #: The new parallelism may not exceed the max parallelism the state was written with:
    #: there would be subtasks without a key group.
    PARALLELISM_ABOVE_MAX = "parallelism-above-max-parallelism"
    #: Max parallelism is the number of key groups; changing it moves keys to other key
    #: groups, so keyed state could no longer be found.
    MAX_PARALLELISM_CHANGED = "max-parallelism-changed"
    #: One state name must have one distribution mode in every subtask of an operator.
    INCONSISTENT_MODE = "inconsistent-distribution-mode"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule, for one operator."""

    operator_uid: str
    rule: RestoreRule
    message: str

    def __str__(self) -> str:
        return f"operator {self.operator_uid!r} [{self.rule}]: {self.message}"


class RestoreValidationError(RestoreError):
    """The checkpoint cannot be restored into the new job graph; lists every violation.

    ``str(error)`` names each operator and rule, e.g.::

        checkpoint 42 cannot be restored into job 'clicks': 1 problem
          operator 'count' [max-parallelism-changed]: keyed state was written with ...
    """

    def __init__(self, checkpoint_id: int, job_id: str, violations: Sequence[Violation]) -> None:
        self.checkpoint_id = checkpoint_id
        self.job_id = job_id
        self.violations = tuple(violations)
        count = len(self.violations)
        lines = [
            f"checkpoint {checkpoint_id} cannot be restored into job {job_id!r}: "
            f"{count} problem{'s' if count != 1 else ''}",
            *(f"  {v}" for v in self.violations),
        ]
        super().__init__("\n".join(lines))


class CheckpointLoadError(RestoreError):
    """A checkpoint's `_metadata` could not be found, read or decoded."""


class NoRestorableCheckpointError(CheckpointLoadError):
    """Not one retained checkpoint of the job could be read."""


class StateFileError(RestoreError):
    """A state file does not hold what its handle says (wrong format, group or checksum)."""
