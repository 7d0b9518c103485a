"""The PySpark pipeline runtime: the only package that imports pyspark.

A pipeline is source → [stages] → key_by → a keyed stateful function (with timers, or
a window) → [stages] → a transactional sink and side-output sinks,
executed on Spark in epochs and checkpointed through the coordinator (docs/architecture.md §7).
pyspark itself is imported only where Spark is touched (the epoch plan and the tasks),
so building a pipeline and its job graph needs no JVM. Executors import this package
to run tasks, so the channels (coordinator, HTTP client) load only when asked for.
"""

from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.builder import Pipeline
from sparkpoint.pipeline.channel import (
    CheckpointAborted,
    CheckpointChannel,
    CheckpointCompleted,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
    TriggerCheckpoint,
)
from sparkpoint.pipeline.driver import PipelineDriver
from sparkpoint.pipeline.driver_status import DriverStatus
from sparkpoint.pipeline.event_time import MAX_WATERMARK, MIN_WATERMARK, WatermarkStrategy
from sparkpoint.pipeline.functions import (
    Context,
    InitializationContext,
    KeyedProcessFunction,
    RuntimeContext,
    SideOutput,
    TimerContext,
)
from sparkpoint.pipeline.keyed_state import (
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.operator_state import OperatorListState, OperatorListStateDescriptor
from sparkpoint.pipeline.partitioner import KeyGroupPartitioner, Slot
from sparkpoint.pipeline.sink import TransactionalFileSink
from sparkpoint.pipeline.sources import ClickEventSource, EpochRange, FileSource, Source
from sparkpoint.pipeline.state_ttl import StateTtlConfig

if TYPE_CHECKING:
    from sparkpoint.pipeline.embedded import EmbeddedChannel


def __getattr__(name: str) -> Any:
    if name == "EmbeddedChannel":
        from sparkpoint.pipeline.embedded import EmbeddedChannel

        return EmbeddedChannel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MAX_WATERMARK",
    "MIN_WATERMARK",
    "CheckpointAborted",
    "CheckpointChannel",
    "CheckpointCompleted",
    "ClickEventSource",
    "Context",
    "DriverStatus",
    "EmbeddedChannel",
    "EpochRange",
    "FileSource",
    "InitializationContext",
    "KeyGroupPartitioner",
    "KeyedProcessFunction",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "OperatorListState",
    "OperatorListStateDescriptor",
    "Pipeline",
    "PipelineDriver",
    "RestoreMode",
    "Restored",
    "RunNotice",
    "RunSuperseded",
    "RuntimeContext",
    "SideOutput",
    "Slot",
    "Source",
    "StateTtlConfig",
    "TimerContext",
    "TransactionalFileSink",
    "TriggerCheckpoint",
    "ValueState",
    "ValueStateDescriptor",
    "WatermarkStrategy",
]
