"""Taking the driver's answers to a trigger: acknowledgements and declines.

A batch of acknowledgements is checked whole before any of it is taken (all or nothing);
the one that completes a checkpoint's set marks it FINALIZING and finalises it in the
same call (finalize.py). A decline aborts the checkpoint and counts as a failure
(transitions.py). Both answer only while the coordinator runs, and only to the current
driver run (the ``guard`` the coordinator gives).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from sparkpoint.checkpoint import OperatorSubtaskState
from sparkpoint.coordinator.errors import CheckpointFinishedError
from sparkpoint.coordinator.finalize import Finalizer
from sparkpoint.coordinator.pending import Acknowledgement, CheckpointStatus
from sparkpoint.coordinator.results import AckResult
from sparkpoint.coordinator.stats import Sizes
from sparkpoint.coordinator.transitions import Transitions

#: Called under the lock before a request is taken: raises if the coordinator stopped or
#: ``run_id`` (None: not checked) is not the current run.
Guard = Callable[[str | None], None]


class Acknowledgements:
    """The acknowledgements and declines of one job's pending checkpoints."""

    def __init__(
        self,
        *,
        transitions: Transitions,
        finalizer: Finalizer,
        clock: Callable[[], int],
        guard: Guard,
    ) -> None:
        self._transitions = transitions
        self._finalizer = finalizer
        self._clock = clock
        self._guard = guard
        #: The states of the checkpoint acknowledged in full last (completed or not): its
        #: driver reads its running state back from that snapshot (the coordinator's
        #: held_states). Read and written under the lock.
        self.last_acknowledged: tuple[OperatorSubtaskState, ...] = ()

    def acknowledge_all(
        self, checkpoint_id: int, acks: Iterable[Acknowledgement], run_id: str | None
    ) -> AckResult:
        """See CheckpointCoordinator.acknowledge_all."""
        started = time.perf_counter()
        now = self._clock()
        transitions = self._transitions
        with transitions.lock:
            self._guard(run_id)
            pending = transitions.tracker.get(checkpoint_id)
            batch = pending.check_acknowledgements(acks)
            if not batch:  # an empty batch is valid and changes nothing
                remaining = pending.total_subtasks - pending.acknowledged_subtasks
                return AckResult(checkpoint_id, CheckpointStatus.IN_PROGRESS, remaining)
            pending.acknowledge(batch, now)
            transitions.stats.report_acknowledged(
                checkpoint_id,
                pending.acknowledged_subtasks,
                Sizes.of(pending),
                now,
                [(a.operator_uid, a.subtask, Sizes.of(a.state)) for a in batch],
            )
            if not pending.is_fully_acknowledged:
                remaining = pending.total_subtasks - pending.acknowledged_subtasks
                return AckResult(checkpoint_id, CheckpointStatus.IN_PROGRESS, remaining)
            pending.status = CheckpointStatus.FINALIZING
            self.last_acknowledged = pending.subtask_states()
        return self._finalizer.finalize(pending, started)

    def decline(
        self, checkpoint_id: int, operator_uid: str, subtask: int, reason: str, run_id: str | None
    ) -> None:
        """See CheckpointCoordinator.decline."""
        transitions = self._transitions
        with transitions.lock:
            self._guard(run_id)
            pending = transitions.tracker.get(checkpoint_id)
            if pending.status is not CheckpointStatus.IN_PROGRESS:
                raise CheckpointFinishedError(
                    f"checkpoint {checkpoint_id} is {pending.status.value}, too late to decline",
                    checkpoint_id=checkpoint_id,
                    status=pending.status.value,
                )
            pending.check_subtask(operator_uid, subtask)
            why = f"declined by operator {operator_uid!r} subtask {subtask}: {reason}"
            transitions.abort(pending, why, self._clock(), count_failure=True)
