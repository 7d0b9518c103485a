"""The pipeline API: source → [stages] → key_by → process → [stages → key_by →
process …] → [stages] → sink, and the job graph it makes. Several sources go into the
first keyed stage through ``union`` (one stream of records of the same shape) or
``connect`` (two keyed streams into one :class:`KeyedCoProcessFunction`), or a join of
two keyed streams (join_entries.py). Stages
(``map``, ``filter``, ``flat_map``, ``dataframe``) called before ``key_by`` run on each
record before it is keyed; called after ``process``, on the keyed function's outputs,
before the next ``key_by`` or the sink (stages.py).

>>> from sparkpoint.examples.clicks import ClickTotals
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
from typing import TYPE_CHECKING, Any, overload

from sparkpoint.checkpoint import JobGraph, OperatorSpec, validate_job_id
from sparkpoint.pipeline.api.broadcast import (
    BroadcastConnectedStream,
    BroadcastStream,
    broadcast_stream,
)
from sparkpoint.pipeline.api.event_time import WatermarkStrategy
from sparkpoint.pipeline.api.functions import KeyedProcessFunction
from sparkpoint.pipeline.api.join_entries import JoinEntries
from sparkpoint.pipeline.api.several_sources import (
    SourceInput,
    TypedKey,
    check_function_kind,
    check_mergeable,
    check_sources_of_several,
    folded_inputs,
    merged_into,
    typed_key,
)
from sparkpoint.pipeline.api.stages import (
    FILTER,
    FLAT_MAP,
    MAP,
    DataFrameStage,
    RecordStage,
    Stage,
    stage_name,
)
from sparkpoint.pipeline.sinks.base import Sink
from sparkpoint.pipeline.sources.base import Source
from sparkpoint.pipeline.state.backend import StateBackend, default_state_backend, state_backend
from sparkpoint.statefiles import default_max_parallelism

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.keyed_state import MapStateDescriptor
    from sparkpoint.pipeline.api.windows import (
        AggregateFunction,
        ProcessWindowFunction,
        WindowAssigner,
    )


@dataclass(frozen=True, slots=True)
class KeyedStage:
    """One keyed stage: the stateless stages before its ``key_by`` (on the previous
    keyed stage's outputs, or on the source's records for the first), its key, its
    keyed function and the uid its state is kept under."""

    stages_before: tuple[Stage, ...]
    key_selector: Callable[[Any], Any]
    #: None only while the pipeline is being built (``key_by`` without ``process`` yet).
    function: KeyedProcessFunction | None
    uid: str
    #: The keyed stage whose outputs it takes (None: the one before it); a branch's.
    input: int | None = None
    #: A branch's last stage: the branch sink's uid, where its outputs go (branches.py).
    branch: str | None = None
    #: A branch's per-record stages between its last keyed stage and its sink.
    stages_after: tuple[Stage, ...] = ()


@dataclass(frozen=True)
class Pipeline(JoinEntries):
    """An immutable description; each builder call returns a new one. Every operator
    has a stable uid (defaults ``source``, ``process``, ``sink``): uids, not positions,
    match state to operators on restore, so keep them when changing a job. Stages have
    no state and no uid: they are not operators of the job graph (docs/pipeline.md)."""

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
    #: Where keyed state lives: ``memory`` (default) or ``rocksdb`` (state/backend.py).
    #: The environment variable SPARKPOINT_STATE_BACKEND sets the default.
    state_backend: StateBackend = field(default_factory=default_state_backend)
    #: Stateless stages on each record before it is keyed, in order.
    pre_key_stages: tuple[Stage, ...] = ()
    #: Stateless stages on the keyed function's outputs before the sink, in order.
    post_process_stages: tuple[Stage, ...] = ()
    #: How records carry event time (None: no event time; event-time timers never fire).
    watermark_strategy: WatermarkStrategy | None = None
    #: Sinks of side outputs (``ctx.output(tag, value)``), by tag.
    side_sinks: tuple[tuple[str, Sink], ...] = ()
    #: Keyed stages after the first (re-keyed: ``.process(…).key_by(…).process(…)``); the
    #: last one being built may still lack its function.
    more_keyed: tuple[KeyedStage, ...] = ()
    #: The sources of a pipeline of several (``union``/``connect``); empty: the one
    #: source is ``source_op``.
    merged: tuple[SourceInput, ...] = ()
    #: The key type ``key_by(key_type=…)`` declared for the first keyed stage.
    key_type: type | None = None
    #: The second input's key selector of a connected first keyed stage (``connect``).
    second_key_selector: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        validate_job_id(self.job_id)
        if self.parallelism < 1:
            raise ValueError(f"parallelism {self.parallelism} must be at least 1")

    def source(self, source: Source, *, uid: str = "source") -> Pipeline:
        """The stream of ``source``'s records. For several sources, make one stream per
        source from the same ``Pipeline``, each with its own uid, and ``union`` or
        ``connect`` them."""
        if self.merged:
            raise ValueError(
                f"pipeline {self.job_id}: source {uid!r} on a stream of several sources; "
                "make a stream of it and union or connect the two"
            )
        return replace(self, source_op=source, source_uid=uid)

    def key_by(
        self, key_selector: Callable[[Any], Any], *, key_type: type | None = None
    ) -> Pipeline:
        """``key_selector(record)`` gives the key: str, bytes, int, bool, None, float or
        a tuple of these (keys are hashed from their canonical bytes, never ``hash()``).
        After a ``process``, starts another keyed stage on its outputs (re-keyed: the
        outputs are partitioned by the new key, and the stateless stages between the
        two run on them). ``key_type``: every key must be of this type (checked on each
        record, and by ``connect`` against the other stream's)."""
        if self._awaiting_process:
            raise ValueError(f"pipeline {self.job_id}: key_by twice without process between")
        if key_type is not None and not isinstance(key_type, type):
            raise TypeError(f"pipeline {self.job_id}: key_type must be a type, got {key_type!r}")
        if key_type is not None:
            key_selector = TypedKey(key_selector, key_type, f"pipeline {self.job_id}")
        if self.function is None:
            return replace(self, key_selector=key_selector, key_type=key_type)
        stage = KeyedStage(self.post_process_stages, key_selector, None, "")
        return replace(self, more_keyed=(*self.more_keyed, stage), post_process_stages=())

    def process(self, function: KeyedProcessFunction, *, uid: str | None = None) -> Pipeline:
        """The keyed function of the stage ``key_by`` began. ``uid`` names its state
        (default ``process``, then ``process-2``, ``process-3`` … for later stages)."""
        if not self._awaiting_process:
            raise ValueError(f"pipeline {self.job_id}: process needs a key_by before it")
        check_function_kind(self.job_id, function, () if self.more_keyed else self.inputs)
        if not self.more_keyed:
            return replace(self, function=function, process_uid=uid or "process")
        stage = replace(
            self.more_keyed[-1], function=function, uid=uid or f"process-{len(self.more_keyed) + 1}"
        )
        return replace(self, more_keyed=(*self.more_keyed[:-1], stage))

    @property
    def _awaiting_process(self) -> bool:
        """The last ``key_by`` has no ``process`` yet."""
        if self.more_keyed:
            return self.more_keyed[-1].function is None
        return self.key_selector is not None and self.function is None

    @property
    def keyed_stages(self) -> tuple[KeyedStage, ...]:
        """Every keyed stage, in order (validate() first: all are complete)."""
        assert self.key_selector is not None and self.function is not None
        first = KeyedStage(self.pre_key_stages, self.key_selector, self.function, self.process_uid)
        return (first, *self.more_keyed)

    @property
    def inputs(self) -> tuple[SourceInput, ...]:
        """Every source, with the stages that run on its records only."""
        if self.merged:
            return self.merged
        if self.source_op is None:
            return ()
        return (SourceInput(self.source_op, self.source_uid, (), self.watermark_strategy),)

    def union(self, *others: Pipeline) -> Pipeline:
        """One stream of this pipeline's records and ``others``' (of the same shape, from
        sources each with its own uid), before ``key_by``. The watermark is the smallest
        of the sources' (not an idle one's: ``WatermarkStrategy.idle_timeout_ms``)."""
        streams = (self, *others)
        for n, stream in enumerate(streams):
            check_mergeable(self, stream, "union", "stream" if n == 0 else f"stream {n + 1}")
            if stream.key_selector is not None:
                raise ValueError(
                    f"pipeline {self.job_id}: union takes streams before key_by "
                    f"({'this stream' if n == 0 else f'stream {n + 1}'} is keyed); "
                    "call key_by after union"
                )
        inputs = tuple(i for stream in streams for i in folded_inputs(stream, 0))
        return merged_into(self, inputs, "union")

    @overload
    def connect(self, other: Pipeline) -> Pipeline: ...
    @overload
    def connect(self, other: BroadcastStream) -> BroadcastConnectedStream: ...
    def connect(self, other: Pipeline | BroadcastStream) -> Pipeline | BroadcastConnectedStream:
        """Two keyed streams into one keyed function, a :class:`KeyedCoProcessFunction`
        given to ``process``: this stream's records to ``process_element1``, ``other``'s
        to ``process_element2``, both with the state and timers of their key. Both must
        be keyed (``key_by``) by keys of one type (say which with ``key_by(…,
        key_type=…)``: connect refuses two different ones). Or this keyed stream and a
        ``broadcast`` one, into a KeyedBroadcastProcessFunction."""
        if isinstance(other, BroadcastStream):
            return other.connected_to(self)
        for stream, which in ((self, "this stream"), (other, "the connected stream")):
            check_mergeable(self, stream, "connect", which)
            if stream.key_selector is None:
                raise ValueError(
                    f"pipeline {self.job_id}: connect joins two keyed streams, and {which} "
                    "is not keyed: call key_by on both before connect"
                )
        if self.second_key_selector is not None or other.second_key_selector is not None:
            raise ValueError(f"pipeline {self.job_id}: a connected stream cannot connect again")
        if None not in (self.key_type, other.key_type) and self.key_type is not other.key_type:
            raise TypeError(
                f"pipeline {self.job_id}: connect of streams keyed by different key types: "
                f"{self.key_type.__name__} and {other.key_type.__name__}"  # type: ignore[union-attr]
            )
        key_type = self.key_type or other.key_type
        first, second = self.key_selector, other.key_selector
        assert first is not None and second is not None
        if key_type is not None:  # one side declared it: the other's keys must be of it too
            first = typed_key(first, key_type, f"pipeline {self.job_id}, first input")
            second = typed_key(second, key_type, f"pipeline {self.job_id}, second input")
        inputs = (*folded_inputs(self, 0), *folded_inputs(other, 1))
        merged = merged_into(self, inputs, "connect")
        return replace(merged, key_selector=first, second_key_selector=second, key_type=key_type)

    def broadcast(self, *descriptors: MapStateDescriptor[Any, Any]) -> BroadcastStream:
        """This unkeyed stream to every subtask of a keyed function, which keeps it in the
        maps ``descriptors`` (broadcast.py): ``keyed.connect(rules.broadcast(RULES))``."""
        return broadcast_stream(self, descriptors)

    def with_branches(self, *branches: Pipeline) -> Pipeline:
        """One job of this pipeline and ``branches``: pipelines built on from one of its
        keyed stages, each with keyed stages and a sink of its own (branches.py)."""
        from sparkpoint.pipeline.api.branches import with_branches

        return with_branches(self, branches)

    def sink(self, sink: Sink, *, uid: str = "sink") -> Pipeline:
        return replace(self, sink_op=sink, sink_uid=uid)

    def side_output(self, tag: str, sink: Sink) -> Pipeline:
        """Values the keyed function emits with ``ctx.output(tag, value)`` (a window's
        late records: tag ``"late"``) go to ``sink``, committed with the main sink's
        transactions. A side output without a sink is dropped."""
        if not tag or any(t == tag for t, _ in self.side_sinks):
            raise ValueError(f"pipeline {self.job_id}: side output tag {tag!r} is empty or taken")
        return replace(self, side_sinks=(*self.side_sinks, (tag, sink)))

    def sinks(self) -> Sink:
        """The sink operator's sink: the main one, or it and the side outputs' sinks."""
        assert self.sink_op is not None
        if not self.side_sinks:
            return self.sink_op
        from sparkpoint.pipeline.sinks.routed import RoutedSink

        return RoutedSink(self.sink_op, self.side_sinks)

    def assign_timestamps(self, strategy: WatermarkStrategy) -> Pipeline:
        """Event time: ``strategy.timestamp(record)`` of each record as it reaches the
        keyed function (after the stages before ``key_by``), watermarks per source split
        (event_time.py)."""
        if not isinstance(strategy, WatermarkStrategy):
            raise TypeError(
                f"pipeline {self.job_id}: assign_timestamps takes a WatermarkStrategy, "
                f"got {type(strategy).__name__}"
            )
        if self.merged:  # every source's records carry time by it
            merged = tuple(replace(i, watermark_strategy=strategy) for i in self.merged)
            return replace(self, watermark_strategy=strategy, merged=merged)
        return replace(self, watermark_strategy=strategy)

    def window(
        self,
        assigner: WindowAssigner,
        *,
        reduce: Callable[[Any, Any], Any] | None = None,
        aggregate: AggregateFunction | None = None,
        process: ProcessWindowFunction | None = None,
        allowed_lateness_ms: int = 0,
        uid: str | None = None,
    ) -> Pipeline:
        """A windowed keyed stage (windows.py): one of ``reduce``, ``aggregate`` or
        ``process`` per window and key. Records too late for every window they belong to
        go to the side output ``"late"``."""
        from sparkpoint.pipeline.api.windows import WindowOperator

        operator = WindowOperator(
            assigner,
            reduce=reduce,
            aggregate=aggregate,
            process=process,
            allowed_lateness_ms=allowed_lateness_ms,
        )
        return self.process(operator, uid=uid or ("window" if self.function is None else None))

    def map(self, fn: Callable[[Any], Any], *, name: str | None = None) -> Pipeline:
        """Each record becomes ``fn(record)``."""
        return self._with_stage(MAP, fn, name)

    def filter(self, fn: Callable[[Any], Any], *, name: str | None = None) -> Pipeline:
        """Only records for which ``fn(record)`` is true go on."""
        return self._with_stage(FILTER, fn, name)

    def flat_map(self, fn: Callable[[Any], Any], *, name: str | None = None) -> Pipeline:
        """Each record becomes the records of the iterable ``fn(record)`` (none or many)."""
        return self._with_stage(FLAT_MAP, fn, name)

    def dataframe(
        self, fn: Callable[[Any], Any], *, schema: Any, name: str | None = None
    ) -> Pipeline:
        """``fn(df) -> DataFrame`` over each epoch's records as a DataFrame of ``schema``
        (a StructType or a DDL string); its rows go on as dicts. Spark SQL functions, a
        join with a static table: anything deterministic (Spark may recompute it)."""
        return self._place(DataFrameStage(fn, schema, self._stage_name("dataframe", fn, name)))

    def _with_stage(self, kind: str, fn: Callable[[Any], Any], name: str | None) -> Pipeline:
        return self._place(RecordStage(kind, fn, self._stage_name(kind, fn, name)))

    def _stage_name(self, kind: str, fn: Callable[[Any], Any], name: str | None) -> str:
        position = len(self.pre_key_stages) + len(self.post_process_stages) + 1
        return stage_name(kind, fn, name, position)

    def _place(self, stage: Stage) -> Pipeline:
        """Before ``key_by`` (no keyed function yet) or after ``process``."""
        if self._awaiting_process:
            raise ValueError(
                f"pipeline {self.job_id}: stage {stage.name!r} comes between key_by and "
                "process; put it before key_by (on records) or after process (on outputs)"
            )
        if self.function is not None:
            return replace(self, post_process_stages=(*self.post_process_stages, stage))
        return replace(self, pre_key_stages=(*self.pre_key_stages, stage))

    def with_parallelism(self, parallelism: int) -> Pipeline:
        return replace(self, parallelism=parallelism)

    def with_state_backend(self, backend: str | StateBackend) -> Pipeline:
        """``"memory"``, ``"rocksdb"`` or a :class:`StateBackend` with its settings (one
        format of checkpoints for both: a job may change backend between runs)."""
        return replace(self, state_backend=state_backend(backend))

    @property
    def effective_max_parallelism(self) -> int:
        return self.max_parallelism or default_max_parallelism(self.parallelism)

    def validate(self) -> None:
        missing = [
            what
            for what, value in (
                ("source", self.inputs or None),
                ("key_by", self.key_selector),
                ("process", self.function),
                ("sink", self.sink_op),
            )
            if value is None
        ]
        if self.more_keyed and self._awaiting_process:
            missing.append("process after the last key_by")
        if missing:
            raise ValueError(f"pipeline {self.job_id}: missing {', '.join(missing)}")
        uids = [*(i.uid for i in self.inputs), *(k.uid for k in self.keyed_stages), self.sink_uid]
        if len(set(uids)) != len(uids):
            raise ValueError(f"pipeline {self.job_id}: operator uids {uids} are not unique")
        if self.merged:
            check_sources_of_several(self.job_id, self.merged, self.pre_key_stages)

    def job_graph(self) -> JobGraph:
        """The sources, each keyed stage and the sink, all at the pipeline's parallelism;
        every subtask of each acknowledges every checkpoint (source offsets, keyed
        state, sink transactions)."""
        self.validate()
        p, m = self.parallelism, self.effective_max_parallelism
        keyed = tuple(
            OperatorSpec(k.uid, p, m, name="process" if n == 0 else f"process {n + 1}", keyed=True)
            for n, k in enumerate(self.keyed_stages)
        )
        sources = tuple(
            OperatorSpec(i.uid, p, m, name=f"source {i.uid}" if self.merged else "source")
            for i in self.inputs
        )
        return JobGraph(
            self.job_id,
            (
                *sources,
                *keyed,
                OperatorSpec(self.sink_uid, p, m, name="sink"),
            ),
        )
