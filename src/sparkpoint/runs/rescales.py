"""Rescale requests of running jobs (docs/operations.md, "Rescaling a running job").

A request is stored with the job's record (ZooKeeper, through the host), so it outlives
the leader that took it. The active driver run hears it with every heartbeat — a
:class:`~sparkpoint.runs.messages.RescaleTo` read from the record, not a numbered notice —
applies it at its next epoch boundary and reports it applied (epoch and checkpoint); a
run that took over from another (a standby, a restarted driver) hears the same request
and applies it, or reports it when it already runs at that parallelism. Without a request
pending, the heartbeat says the parallelism of the job's graph, so that a standby
registered before a rescale adopts the job's current one when it is granted the job.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

from sparkpoint.checkpoint import JobGraph
from sparkpoint.runs.errors import InvalidParallelismError
from sparkpoint.runs.messages import RescaleTo
from sparkpoint.store import JobRecord, RescaleRequest


def graph_parallelism(graph: JobGraph) -> int:
    """The parallelism a pipeline's graph runs at (every operator has it)."""
    return max(op.parallelism for op in graph.operators)


def graph_max_parallelism(graph: JobGraph) -> int:
    """The highest parallelism every operator of ``graph`` can run at."""
    return min(op.max_parallelism for op in graph.operators)


def at_parallelism(graph: JobGraph, parallelism: int) -> JobGraph:
    """``graph`` with every operator at ``parallelism``."""
    return replace(graph, operators=tuple(replace(op, parallelism=parallelism)
                                          for op in graph.operators))  # fmt: skip


def only_parallelism_differs(a: JobGraph, b: JobGraph) -> bool:
    """The same job and operators, at whatever parallelisms (a rescale's graphs)."""
    return at_parallelism(a, 1) == at_parallelism(b, 1)


def new_request(record: JobRecord, parallelism: int) -> RescaleRequest:
    """A request to run ``record``'s job at ``parallelism``, refused with a clear error
    unless the job can run at it. At its graph's parallelism already (and none pending
    elsewhere), it is "unchanged": nothing is to be done."""
    if isinstance(parallelism, bool) or not isinstance(parallelism, int):
        raise InvalidParallelismError(f"parallelism must be an integer, not {parallelism!r}")
    highest = graph_max_parallelism(record.graph)
    if not 1 <= parallelism <= highest:
        raise InvalidParallelismError(
            f"job {record.job_id}: cannot rescale to parallelism {parallelism}: it must be "
            f"between 1 and the job's max parallelism {highest} (its number of key groups)"
        )
    request = RescaleRequest(uuid.uuid4().hex[:12], parallelism, int(time.time() * 1000))
    pending = record.rescale is not None and record.rescale.pending
    if parallelism == graph_parallelism(record.graph) and not pending:
        return replace(request, state="unchanged")
    return request


def instruction(record: JobRecord) -> RescaleTo:
    """What an active driver run hears of rescaling with each heartbeat."""
    request = record.rescale
    if request is not None and request.pending:
        return RescaleTo(request.parallelism, request.request_id)
    return RescaleTo(graph_parallelism(record.graph))
