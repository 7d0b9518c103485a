"""The pipeline API: source → key_by → process → sink, and the job graph it makes.

>>> from sparkpoint.pipeline.examples.clicks import ClickTotals
>>> from sparkpoint.pipeline import ClickEventSource, Pipeline, TransactionalFileSink
>>> p = (Pipeline("clicks", parallelism=4)
...      .source(ClickEventSource(records_per_split=1000))
...      .key_by(lambda e: e["user"])
...      .process(ClickTotals())
...      .sink(TransactionalFileSink("/tmp/clicks-out")))  # doctest: +SKIP
>>> [op.uid for op in p.job_graph().operators]  # doctest: +SKIP
['source', 'process', 'sink']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sparkpoint.checkpoint import JobGraph, OperatorSpec, validate_job_id
from sparkpoint.pipeline.functions import KeyedProcessFunction
from sparkpoint.pipeline.sink import Sink
from sparkpoint.pipeline.sources.base import Source
from sparkpoint.pipeline.state_backend import StateBackend, default_state_backend, state_backend
from sparkpoint.statefiles import default_max_parallelism


@dataclass(frozen=True)
class Pipeline:
    """An immutable description; each builder call returns a new one. Every operator
    has a stable uid (defaults ``source``, ``process``, ``sink``): uids, not positions,
    match state to operators on restore, so keep them when changing a job."""

    job_id: str
    parallelism: int = 4
    max_parallelism: int | None = None
    source_op: Source | None = None
    source_uid: str = "source"
    key_selector: Callable[[Any], Any] | None = None
    function: KeyedProcessFunction | None = None
    process_uid: str = "process"
    sink_op: Sink | None = None
    sink_uid: str = "sink"
    #: Where keyed state lives: ``memory`` (default) or ``rocksdb`` (state_backend.py).
    #: The environment variable SPARKPOINT_STATE_BACKEND sets the default.
    state_backend: StateBackend = field(default_factory=default_state_backend)

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if self.parallelism < 1:
            raise ValueError(f"parallelism {self.parallelism} must be at least 1")

    def source(self, source: Source, *, uid: str = "source") -> Pipeline:
        return replace(self, source_op=source, source_uid=uid)

    def key_by(self, key_selector: Callable[[Any], Any]) -> Pipeline:
        """``key_selector(record)`` gives the key: str, bytes, int, bool, None, float or
        a tuple of these (keys are hashed from their canonical bytes, never ``hash()``)."""
        return replace(self, key_selector=key_selector)

    def process(self, function: KeyedProcessFunction, *, uid: str = "process") -> Pipeline:
        return replace(self, function=function, process_uid=uid)

    def sink(self, sink: Sink, *, uid: str = "sink") -> Pipeline:
        return replace(self, sink_op=sink, sink_uid=uid)

    def with_parallelism(self, parallelism: int) -> Pipeline:
        return replace(self, parallelism=parallelism)

    def with_state_backend(self, backend: str | StateBackend) -> Pipeline:
        """``"memory"``, ``"rocksdb"`` or a :class:`StateBackend` with its settings.
        Checkpoints and savepoints are in one format: a job may change backend between
        runs and restore either way."""
        return replace(self, state_backend=state_backend(backend))

    @property
    def effective_max_parallelism(self) -> int:
        return self.max_parallelism or default_max_parallelism(self.parallelism)

    def validate(self) -> None:
        missing = [
            what
            for what, value in (
                ("source", self.source_op),
                ("key_by", self.key_selector),
                ("process", self.function),
                ("sink", self.sink_op),
            )
            if value is None
        ]
        if missing:
            raise ValueError(f"pipeline {self.job_id}: missing {', '.join(missing)}")
        uids = [self.source_uid, self.process_uid, self.sink_uid]
        if len(set(uids)) != len(uids):
            raise ValueError(f"pipeline {self.job_id}: operator uids {uids} are not unique")

    def job_graph(self) -> JobGraph:
        """Three operators, all at the pipeline's parallelism; every subtask of each
        acknowledges every checkpoint (source offsets, keyed state, sink transactions)."""
        self.validate()
        p, m = self.parallelism, self.effective_max_parallelism
        return JobGraph(
            self.job_id,
            (
                OperatorSpec(self.source_uid, p, m, name="source"),
                OperatorSpec(self.process_uid, p, m, name="process", keyed=True),
                OperatorSpec(self.sink_uid, p, m, name="sink"),
            ),
        )
