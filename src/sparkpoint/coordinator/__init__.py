"""The CheckpointCoordinator of a job and what it is built from.

The service creates one :class:`CheckpointCoordinator` per job while it is leader, calls
:meth:`~CheckpointCoordinator.tick` on a timer, forwards acknowledgements and declines, and
puts :meth:`~CheckpointCoordinator.notifications_since` into heartbeat replies.
"""

from sparkpoint.coordinator.cleanup import CleanupWorker
from sparkpoint.coordinator.coordinator import CheckpointCoordinator, wall_clock_ms
from sparkpoint.coordinator.errors import (
    CheckpointFinishedError,
    CoordinatorError,
    CoordinatorRequestError,
    CoordinatorStoppedError,
    DuplicateAcknowledgeError,
    InvalidSubtaskStateError,
    SupersededRunError,
    TriggerFailedError,
    TriggerRejectedError,
    UnexpectedSubtaskError,
    UnknownCheckpointError,
)
from sparkpoint.coordinator.notifications import (
    AbortNotice,
    CompletionNotice,
    Notice,
    TriggerNotice,
)
from sparkpoint.coordinator.options import OPTION_KEYS, CheckpointingOptions
from sparkpoint.coordinator.pending import Acknowledgement, CheckpointStatus, PendingCheckpoint
from sparkpoint.coordinator.results import AckResult, TickReport
from sparkpoint.coordinator.stats import CheckpointRecord, CheckpointStatsTracker
from sparkpoint.coordinator.storage_api import (
    CheckpointLocationLike,
    CheckpointStorageLike,
    CommittedMetadataLike,
)

__all__ = [
    "OPTION_KEYS",
    "AbortNotice",
    "AckResult",
    "Acknowledgement",
    "CheckpointCoordinator",
    "CheckpointFinishedError",
    "CheckpointLocationLike",
    "CheckpointRecord",
    "CheckpointStatsTracker",
    "CheckpointStatus",
    "CheckpointStorageLike",
    "CheckpointingOptions",
    "CleanupWorker",
    "CommittedMetadataLike",
    "CompletionNotice",
    "CoordinatorError",
    "CoordinatorRequestError",
    "CoordinatorStoppedError",
    "DuplicateAcknowledgeError",
    "InvalidSubtaskStateError",
    "Notice",
    "PendingCheckpoint",
    "SupersededRunError",
    "TickReport",
    "TriggerFailedError",
    "TriggerNotice",
    "TriggerRejectedError",
    "UnexpectedSubtaskError",
    "UnknownCheckpointError",
    "wall_clock_ms",
]
