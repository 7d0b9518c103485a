"""The operator state the driver itself snapshots and restores: the source's offsets and
the sink's transactions, one operator-state stream per subtask (docs/architecture.md §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint import CheckpointKind, DistributionMode, OperatorSubtaskState
from sparkpoint.pipeline.api.operator_state import decode_element, encode_element
from sparkpoint.pipeline.channels.protocol import Ack, TriggerCheckpoint
from sparkpoint.pipeline.runtime.clock import SOURCE_WATERMARKS, EpochClock
from sparkpoint.pipeline.sinks.base import Sink
from sparkpoint.pipeline.sources import Source
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
    source: Source,
    sink: Sink,
    watermarks: Sequence[tuple[str, int]] = (),
) -> list[Ack]:
    """Source offsets (and event-time maxima, clock.py) and sink transactions,
    one operator-state stream per subtask."""
    source_uid, sink_uid, parallelism = pipeline.source_uid, pipeline.sink_uid, pipeline.parallelism
    source_parts: dict[str, list[list[bytes]]] = {
        SOURCE_OFFSETS: _spread(sorted(source.offsets().items()), parallelism)
    }
    if watermarks:
        source_parts[SOURCE_WATERMARKS] = _spread(watermarks, parallelism)
    sink_parts = {SINK_TRANSACTIONS: sink.snapshot(parallelism)}
    acks: list[Ack] = []
    for uid, named in ((source_uid, source_parts), (sink_uid, sink_parts)):
        for i in range(parallelism):
            states = {name: parts[i] for name, parts in named.items()}
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
    plan: Any, pipeline: Pipeline, source: Source, sink: Sink, clock: EpochClock
) -> None:
    """What :func:`driver_side_acks` wrote, back from a restore plan: the source's offsets
    and event-time maxima, the sink's transactions."""
    source_uid, sink_uid = pipeline.source_uid, pipeline.sink_uid
    offsets = restored_elements(plan, source_uid, SOURCE_OFFSETS)
    source.restore(dict(decode_element(e) for e in offsets))
    clock.restore(decode_element(e) for e in restored_elements(plan, source_uid, SOURCE_WATERMARKS))
    sink.restore(restored_elements(plan, sink_uid, SINK_TRANSACTIONS))
