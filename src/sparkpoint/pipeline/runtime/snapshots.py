"""The operator state the driver itself snapshots and restores: each source's offsets and
the sink's transactions, one operator-state stream per subtask (docs/architecture.md §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint import CheckpointKind, DistributionMode, OperatorSubtaskState
from sparkpoint.pipeline.api.operator_state import decode_element, encode_element
from sparkpoint.pipeline.channels.protocol import Ack, TriggerCheckpoint
from sparkpoint.pipeline.runtime.clock import SOURCE_WATERMARKS, EpochClock
from sparkpoint.pipeline.runtime.inputs import SourceGroup
from sparkpoint.pipeline.sinks.base import Sink
from sparkpoint.recovery.reader import read_operator_state
from sparkpoint.storage import filesystem_for
from sparkpoint.storage.location import CheckpointLocation
from sparkpoint.storage.streams import StateOutputStream

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline

#: The state names of the source's offsets and the sink's transactions (the source's
#: event-time maxima are SOURCE_WATERMARKS, clock.py).
SOURCE_OFFSETS = "offsets"
SINK_TRANSACTIONS = "transactions"


def checkpoint_location(
    trigger: TriggerCheckpoint, job_id: str, inline_threshold: int
) -> CheckpointLocation:
    """Where the checkpoint ``trigger`` asks for is written."""
    savepoint = trigger.kind is CheckpointKind.SAVEPOINT
    return CheckpointLocation(
        filesystem_for(trigger.directory),
        trigger.directory,
        job_id,
        None if savepoint else trigger.checkpoint_id,
        savepoint,
        inline_threshold,
    )


def driver_side_acks(
    location: CheckpointLocation,
    pipeline: Pipeline,
    sources: SourceGroup,
    sink: Sink,
    watermarks: Sequence[tuple[str, int]] = (),
) -> list[Ack]:
    """Each source's offsets (and event-time maxima, clock.py) under its uid, and the
    sink's transactions, one operator-state stream per subtask."""
    parallelism = pipeline.parallelism
    named: list[tuple[str, dict[str, list[list[bytes]]]]] = []
    for n, source in enumerate(sources.inputs):
        parts = {SOURCE_OFFSETS: _spread(sorted(source.source.offsets().items()), parallelism)}
        if watermarks:
            parts[SOURCE_WATERMARKS] = _spread(sources.watermarks_of(n, watermarks), parallelism)
        named.append((source.uid, parts))
    named.append((pipeline.sink_uid, {SINK_TRANSACTIONS: sink.snapshot(parallelism)}))
    acks: list[Ack] = []
    for uid, by_name in named:
        for i in range(parallelism):
            states = {name: parts[i] for name, parts in by_name.items()}
            acks.append((uid, i, _write_operator_state(location, uid, i, states)))
    return acks


def _spread(items: Sequence[Any], parallelism: int) -> list[list[bytes]]:
    parts: list[list[bytes]] = [[] for _ in range(parallelism)]
    for n, item in enumerate(items):
        parts[n % parallelism].append(encode_element(item))
    return parts


def restored_elements(plan: Any, uid: str, name: str) -> list[bytes]:
    """Every element of the operator state ``name`` of ``uid`` in a restore plan (none
    when the checkpoint has no such operator)."""
    if uid not in plan.operators:
        return []
    elements: list[bytes] = []
    for subtask in plan.operators[uid].subtasks:
        elements.extend(read_operator_state(subtask.operator).get(name, []))
    return elements


def _write_operator_state(
    location: CheckpointLocation, uid: str, subtask: int, states: dict[str, list[bytes]]
) -> OperatorSubtaskState:
    from sparkpoint.statefiles.writers import OperatorStateWriter

    stream: StateOutputStream = location.state_output(uid, subtask, 0)
    writer = OperatorStateWriter(stream)
    for name, elements in states.items():
        writer.declare(name, DistributionMode.SPLIT_DISTRIBUTE)
        for element in elements:
            writer.add(name, DistributionMode.SPLIT_DISTRIBUTE, element)
    return OperatorSubtaskState(operator=(writer.handle(stream.close_and_get_handle()),))


def restore_driver_side(
    plan: Any, pipeline: Pipeline, sources: SourceGroup, sink: Sink, clock: EpochClock
) -> None:
    """What :func:`driver_side_acks` wrote, back from a restore plan: each source's
    offsets and event-time maxima, found by its uid (a source the checkpoint does not
    have starts at the beginning), the sink's transactions."""
    watermarks: list[tuple[str, int]] = []
    for n, source in enumerate(sources.inputs):
        offsets = restored_elements(plan, source.uid, SOURCE_OFFSETS)
        source.source.restore(dict(decode_element(e) for e in offsets))
        maxima = restored_elements(plan, source.uid, SOURCE_WATERMARKS)
        watermarks += sources.restored_watermarks(n, (decode_element(e) for e in maxima))
    clock.restore(watermarks)
    sink.restore(restored_elements(plan, pipeline.sink_uid, SINK_TRANSACTIONS))
