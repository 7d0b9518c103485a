"""What the coordinator refuses, typed so a thin HTTP layer can map each to a status code.

A :class:`CoordinatorRequestError` means the request was wrong or late and *nothing was
changed*. :class:`CoordinatorStoppedError` means this coordinator no longer acts (it lost
leadership or the job ended), so the request belongs to another replica or none.
"""

from __future__ import annotations


class CoordinatorError(Exception):
    """Base of the coordinator's own exceptions."""


class CoordinatorStoppedError(CoordinatorError):
    """The coordinator was stopped (leadership lost or job over); it accepts nothing more."""


class TriggerFailedError(CoordinatorError):
    """A requested savepoint could not be started (its directory could not be prepared).

    Unlike a bad request this may have used up a checkpoint id.
    """


class CoordinatorRequestError(CoordinatorError):
    """A request refused without any change to the coordinator, the store or storage."""

    def __init__(self, message: str, *, checkpoint_id: int | None = None) -> None:
        super().__init__(message)
        self.checkpoint_id = checkpoint_id


class UnknownCheckpointError(CoordinatorRequestError):
    """No checkpoint with this id was triggered by this coordinator."""


class CheckpointFinishedError(CoordinatorRequestError):
    """The checkpoint is no longer collecting acknowledgements (completed, failed, expired,
    or already finalising). ``status`` says which."""

    def __init__(self, message: str, *, checkpoint_id: int, status: str) -> None:
        super().__init__(message, checkpoint_id=checkpoint_id)
        self.status = status


class DuplicateAcknowledgeError(CoordinatorRequestError):
    """This (operator, subtask) already acknowledged the checkpoint."""


class UnexpectedSubtaskError(CoordinatorRequestError):
    """The checkpoint does not wait for this (operator, subtask)."""


class InvalidSubtaskStateError(CoordinatorRequestError):
    """The acknowledged state contradicts the operator (e.g. key groups beyond its max
    parallelism), so it could never be written into ``_metadata``."""


class TriggerRejectedError(CoordinatorRequestError):
    """A savepoint cannot be triggered now (job failing, stopped with a savepoint, or a
    stop-with-savepoint already under way)."""


class SupersededRunError(CoordinatorRequestError):
    """The call comes from a driver run that is not the job's current one (a newer run
    registered since, or the run was never the job's): it is refused, nothing changes.
    ``run_id``: the caller's run; ``current_run_id``: the job's current run (None: none)."""

    def __init__(self, job_id: str, run_id: str, current_run_id: str | None) -> None:
        current = f"run {current_run_id}" if current_run_id else "no run"
        super().__init__(
            f"job {job_id}: driver run {run_id} is superseded; the job's current run is "
            f"{current} (a driver run that is not current may not heartbeat, acknowledge "
            "or decline; it must stop)"
        )
        self.job_id = job_id
        self.run_id = run_id
        self.current_run_id = current_run_id
