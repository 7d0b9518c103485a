"""The PySpark pipeline runtime: the only package that imports pyspark.

A pipeline is source → [stages] → key_by → a keyed stateful function (with timers, or
a window) → [stages] → a transactional sink and side-output sinks,
executed on Spark in epochs and checkpointed through the coordinator (docs/architecture.md §7).
pyspark itself is imported only where Spark is touched (the epoch plan and the tasks),
so building a pipeline and its job graph needs no JVM. Executors import this package
to run tasks, so the channels (coordinator, HTTP client) load only when asked for.
"""

import importlib
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint import DistributionMode
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
from sparkpoint.pipeline.state_backend import BACKEND_NAMES, StateBackend
from sparkpoint.pipeline.state_ttl import StateTtlConfig
from sparkpoint.pipeline.windows import (
    LATE,
    AggregateFunction,
    EventTimeSessionWindows,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    WindowAssigner,
)

if TYPE_CHECKING:
    from sparkpoint.pipeline.background import BackgroundChannel
    from sparkpoint.pipeline.embedded import EmbeddedChannel
    from sparkpoint.pipeline.kafka_sink import KafkaSink
    from sparkpoint.pipeline.postgres import PostgresSink
    from sparkpoint.pipeline.remote import RemoteChannel
    from sparkpoint.pipeline.routed_sink import RoutedSink
    from sparkpoint.pipeline.session import spark_session
    from sparkpoint.pipeline.sources.kafka import KafkaSource
    from sparkpoint.pipeline.sources.rabbitmq import RabbitMQSource
    from sparkpoint.pipeline.state_processor import read_keyed_state, write_savepoint

#: Public names whose modules load only when asked for: the channels (the coordinator, the
#: HTTP client), the connectors (their client libraries) and the Spark session factory
#: stay out of an executor that only runs tasks.
_LAZY = {
    "BackgroundChannel": "sparkpoint.pipeline.background",
    "EmbeddedChannel": "sparkpoint.pipeline.embedded",
    "KafkaSink": "sparkpoint.pipeline.kafka_sink",
    "KafkaSource": "sparkpoint.pipeline.sources.kafka",
    "PostgresSink": "sparkpoint.pipeline.postgres",
    "RabbitMQSource": "sparkpoint.pipeline.sources.rabbitmq",
    "RemoteChannel": "sparkpoint.pipeline.remote",
    "RoutedSink": "sparkpoint.pipeline.routed_sink",
    "read_keyed_state": "sparkpoint.pipeline.state_processor",
    "spark_session": "sparkpoint.pipeline.session",
    "write_savepoint": "sparkpoint.pipeline.state_processor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "BACKEND_NAMES",
    "LATE",
    "MAX_WATERMARK",
    "MIN_WATERMARK",
    "AggregateFunction",
    "BackgroundChannel",
    "CheckpointAborted",
    "CheckpointChannel",
    "CheckpointCompleted",
    "ClickEventSource",
    "Context",
    "DistributionMode",
    "DriverStatus",
    "EmbeddedChannel",
    "EpochRange",
    "EventTimeSessionWindows",
    "FileSource",
    "InitializationContext",
    "KafkaSink",
    "KafkaSource",
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
    "PostgresSink",
    "ProcessWindowFunction",
    "RabbitMQSource",
    "RemoteChannel",
    "RestoreMode",
    "Restored",
    "RoutedSink",
    "RunNotice",
    "RunSuperseded",
    "RuntimeContext",
    "SideOutput",
    "SlidingEventTimeWindows",
    "Slot",
    "Source",
    "StateBackend",
    "StateTtlConfig",
    "TimeWindow",
    "TimerContext",
    "TransactionalFileSink",
    "TriggerCheckpoint",
    "TumblingEventTimeWindows",
    "ValueState",
    "ValueStateDescriptor",
    "WatermarkStrategy",
    "WindowAssigner",
    "read_keyed_state",
    "spark_session",
    "write_savepoint",
]
