"""Can this checkpoint be restored into that job graph? (docs/architecture.md §6, Flink's
Checkpoints.loadAndValidateCheckpoint and StateAssignmentOperation's checks.)"""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.checkpoint import CompletedCheckpoint, DistributionMode, JobGraph, OperatorState
from sparkpoint.recovery.errors import RestoreRule, RestoreValidationError, Violation


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Which checkpointed operators will be restored and which are left behind."""

    restored: tuple[str, ...]
    #: Operators in the checkpoint but not in the new graph (their state is dropped).
    non_restored: tuple[str, ...]


def _modes_consistent(state: OperatorState) -> list[Violation]:
    seen: dict[str, DistributionMode] = {}
    out: list[Violation] = []
    for index in sorted(state.subtask_states):
        for handle in state.subtask_states[index].operator:
            for name, info in handle.states.items():
                first = seen.setdefault(name, info.mode)
                if first is not info.mode:
                    out.append(
                        Violation(
                            state.operator_uid,
                            RestoreRule.INCONSISTENT_MODE,
                            f"state {name!r} is {first} in one subtask and {info.mode} in "
                            f"subtask {index}",
                        )
                    )
    return out


def has_state(state: OperatorState) -> bool:
    return any(s.has_state for s in state.subtask_states.values())


def has_keyed_state(state: OperatorState) -> bool:
    return any(s.keyed for s in state.subtask_states.values())


def validate_restore(
    checkpoint: CompletedCheckpoint, graph: JobGraph, allow_non_restored_state: bool = False
) -> ValidationResult:
    """Check every rule for every operator; raise one error listing all violations.

    An operator that is in the checkpoint but not in the graph is an error only if it has
    state: like Flink, an operator that checkpointed nothing loses nothing by going away.

    >>> from sparkpoint.checkpoint import CheckpointKind, OperatorSpec
    >>> cp = CompletedCheckpoint("job", 1, CheckpointKind.CHECKPOINT, 0, 0, {})
    >>> validate_restore(cp, JobGraph("job", (OperatorSpec("src", 2, 128),)))
    ValidationResult(restored=(), non_restored=())
    """
    violations: list[Violation] = []
    restored: list[str] = []
    non_restored: list[str] = []
    uids = {op.uid for op in graph.operators}
    for uid, state in checkpoint.operator_states.items():
        if uid not in uids:
            non_restored.append(uid)
            if has_state(state) and not allow_non_restored_state:
                violations.append(
                    Violation(
                        uid,
                        RestoreRule.OPERATOR_MISSING,
                        "it has state in the checkpoint but is not in the new job graph; "
                        "restore with allow_non_restored_state to drop that state",
                    )
                )
            continue
        restored.append(uid)
        spec = graph.operator(uid)
        if spec.parallelism > state.max_parallelism:
            violations.append(
                Violation(
                    uid,
                    RestoreRule.PARALLELISM_ABOVE_MAX,
                    f"new parallelism {spec.parallelism} is above the max parallelism "
                    f"{state.max_parallelism} its state was written with",
                )
            )
        if has_keyed_state(state) and spec.max_parallelism != state.max_parallelism:
            violations.append(
                Violation(
                    uid,
                    RestoreRule.MAX_PARALLELISM_CHANGED,
                    f"keyed state was written with max parallelism {state.max_parallelism}, "
                    f"the new graph asks for {spec.max_parallelism}; max parallelism may not "
                    "change for keyed state",
                )
            )
        violations += _modes_consistent(state)
    if violations:
        raise RestoreValidationError(checkpoint.checkpoint_id, graph.job_id, violations)
    return ValidationResult(tuple(restored), tuple(non_restored))
