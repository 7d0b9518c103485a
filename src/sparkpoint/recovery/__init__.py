"""Recovery: load `_metadata`, validate it against a new job graph, plan the restore.

Planning (:func:`plan_restore`) is pure: checkpoint + new graph → :class:`RestorePlan`.
Loading (``recovery.loading``) and reading state files (``recovery.reader``) are separate
steps, so the planner can run anywhere and tasks read only their share.

``recovery.loading`` (storage, metrics) and ``recovery.reader`` (storage) are not
imported here: Spark executors import ``recovery.statefile`` to write snapshots, and
importing it runs this module, which must stay light.
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
from sparkpoint.recovery.keygroups import (
    default_max_parallelism,
    key_group_for_key,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from sparkpoint.recovery.keys import KeyEncodingError, canonical_key_bytes, decode_key
from sparkpoint.recovery.plan import OperatorRestore, RestorePlan, SubtaskRestore
from sparkpoint.recovery.validation import ValidationResult, validate_restore

__all__ = [
    "CheckpointLoadError",
    "KeyEncodingError",
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
    "canonical_key_bytes",
    "decode_key",
    "default_max_parallelism",
    "key_group_for_key",
    "key_group_range_for_subtask",
    "plan_restore",
    "subtask_for_key_group",
    "validate_restore",
]
