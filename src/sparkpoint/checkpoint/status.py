"""Checkpoint kinds and job statuses."""

from __future__ import annotations

import enum


class CheckpointKind(enum.StrEnum):
    """A periodic checkpoint is owned and retained by sparkpoint; a savepoint by the user."""

    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class JobStatus(enum.StrEnum):
    """The lifecycle of a job as the coordinator sees it (names after Flink's JobStatus)."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    SUSPENDED = "SUSPENDED"

    @property
    def is_globally_terminal(self) -> bool:
        """Terminal for the whole cluster: no coordinator will ever resume the job.

        SUSPENDED is only locally terminal (this coordinator lost leadership), so a job in
        it keeps its checkpoints and counter for the next leader.
        """
        return self in {JobStatus.FAILED, JobStatus.CANCELED, JobStatus.FINISHED}
