"""Recovery: load `_metadata`, validate it against a new job graph, plan the restore.

Planning (:func:`plan_restore`) is pure: checkpoint + new graph → :class:`RestorePlan`.
Loading (``recovery.loading``) and reading state files (``recovery.reader``) are separate
steps, so the planner can run anywhere and tasks read only their share.

``recovery.loading`` (storage, metrics) and ``recovery.reader`` (storage) are not
imported here, so the planner stays light. The state format executors write (keys, key
groups, stream writers and the format's reader) is ``sparkpoint.statefiles``, below this
package: writing a snapshot imports nothing of recovery.
"""

from sparkpoint.recovery.assignment import plan_restore
from sparkpoint.recovery.errors import (
    CheckpointLoadError,
    NoRestorableCheckpointError,
    RestoreError,
    RestoreRule,
    RestoreValidationError,
    StateFileError,
    Violation,
)
from sparkpoint.recovery.plan import OperatorRestore, RestorePlan, SubtaskRestore
from sparkpoint.recovery.validation import ValidationResult, validate_restore

__all__ = [
    "CheckpointLoadError",
    "NoRestorableCheckpointError",
    "OperatorRestore",
    "RestoreError",
    "RestorePlan",
    "RestoreRule",
    "RestoreValidationError",
    "StateFileError",
    "SubtaskRestore",
    "ValidationResult",
    "Violation",
    "plan_restore",
    "validate_restore",
]
