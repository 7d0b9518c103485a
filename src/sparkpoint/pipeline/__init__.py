"""The PySpark pipeline runtime: the only package that imports pyspark.

A pipeline is source(s) → [stages] → key_by → a keyed stateful function (with timers, or
a window) → [stages] → a transactional sink and side-output sinks,
executed on Spark in epochs and checkpointed through the coordinator (docs/architecture.md §7).
pyspark itself is imported only where Spark is touched (the epoch plan and the tasks),
so building a pipeline and its job graph needs no JVM. Executors import this package
to run tasks, so the channels (coordinator, HTTP client) load only when asked for.
"""

import importlib
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint import DistributionMode
from sparkpoint.pipeline.api.broadcast import (
    BroadcastContext,
    BroadcastState,
    KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastState,
)
from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.api.event_time import MAX_WATERMARK, MIN_WATERMARK, WatermarkStrategy
from sparkpoint.pipeline.api.functions import (
    Context,
    InitializationContext,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    RuntimeContext,
    SideOutput,
    TimerContext,
)
from sparkpoint.pipeline.api.joins import JoinContext, ProcessJoinFunction
from sparkpoint.pipeline.api.keyed_state import (
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.api.lookup import LookupTable
from sparkpoint.pipeline.api.operator_state import OperatorListState, OperatorListStateDescriptor
from sparkpoint.pipeline.api.ttl import StateTtlConfig
from sparkpoint.pipeline.api.windows import (
    LATE,
    AggregateFunction,
    EventTimeSessionWindows,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    WindowAssigner,
)
from sparkpoint.pipeline.channels.protocol import (
    CheckpointAborted,
    CheckpointChannel,
    CheckpointCompleted,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
    TriggerCheckpoint,
)
from sparkpoint.pipeline.runtime.driver import PipelineDriver
from sparkpoint.pipeline.runtime.partitioner import KeyGroupPartitioner, Slot
from sparkpoint.pipeline.runtime.status import DriverStatus, Rescaled
from sparkpoint.pipeline.sinks.base import Sink
from sparkpoint.pipeline.sinks.files import TransactionalFileSink, to_json_line
from sparkpoint.pipeline.sources import ClickEventSource, EpochRange, FileSource, Source
from sparkpoint.pipeline.state.backend import BACKEND_NAMES, StateBackend
from sparkpoint.statefiles.keys import Key

if TYPE_CHECKING:
    from sparkpoint.coordinator import CheckpointingOptions
    from sparkpoint.pipeline.channels.background import BackgroundChannel
    from sparkpoint.pipeline.channels.embedded import EmbeddedChannel
    from sparkpoint.pipeline.channels.remote import RemoteChannel
    from sparkpoint.pipeline.runtime.spark_session import spark_session
    from sparkpoint.pipeline.sinks.kafka import KafkaSink
    from sparkpoint.pipeline.sinks.kafka_admin import create_topics
    from sparkpoint.pipeline.sinks.postgres import PostgresSink
    from sparkpoint.pipeline.sinks.routed import RoutedSink
    from sparkpoint.pipeline.sources.kafka import KafkaSource
    from sparkpoint.pipeline.sources.rabbitmq import RabbitMQSource
    from sparkpoint.pipeline.state_processor.savepoints import read_keyed_state, write_savepoint

#: Public names whose modules load only when asked for: the channels (the coordinator, the
#: HTTP client), the connectors (their client libraries) and the Spark session factory
#: stay out of an executor that only runs tasks.
_LAZY = {
    "CheckpointingOptions": "sparkpoint.coordinator",
    "BackgroundChannel": "sparkpoint.pipeline.channels.background",
    "EmbeddedChannel": "sparkpoint.pipeline.channels.embedded",
    "KafkaSink": "sparkpoint.pipeline.sinks.kafka",
    "KafkaSource": "sparkpoint.pipeline.sources.kafka",
    "create_topics": "sparkpoint.pipeline.sinks.kafka_admin",
    "PostgresSink": "sparkpoint.pipeline.sinks.postgres",
    "RabbitMQSource": "sparkpoint.pipeline.sources.rabbitmq",
    "RemoteChannel": "sparkpoint.pipeline.channels.remote",
    "RoutedSink": "sparkpoint.pipeline.sinks.routed",
    "read_keyed_state": "sparkpoint.pipeline.state_processor.savepoints",
    "spark_session": "sparkpoint.pipeline.runtime.spark_session",
    "write_savepoint": "sparkpoint.pipeline.state_processor.savepoints",
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
    "BroadcastContext",
    "BroadcastState",
    "CheckpointAborted",
    "CheckpointChannel",
    "CheckpointCompleted",
    "CheckpointingOptions",
    "ClickEventSource",
    "Context",
    "DistributionMode",
    "DriverStatus",
    "EmbeddedChannel",
    "EpochRange",
    "EventTimeSessionWindows",
    "FileSource",
    "InitializationContext",
    "JoinContext",
    "KafkaSink",
    "KafkaSource",
    "Key",
    "KeyGroupPartitioner",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "ListState",
    "ListStateDescriptor",
    "LookupTable",
    "MapState",
    "MapStateDescriptor",
    "OperatorListState",
    "OperatorListStateDescriptor",
    "Pipeline",
    "PipelineDriver",
    "PostgresSink",
    "ProcessJoinFunction",
    "ProcessWindowFunction",
    "RabbitMQSource",
    "ReadOnlyBroadcastState",
    "RemoteChannel",
    "Rescaled",
    "RestoreMode",
    "Restored",
    "RoutedSink",
    "RunNotice",
    "RunSuperseded",
    "RuntimeContext",
    "SideOutput",
    "Sink",
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
    "create_topics",
    "read_keyed_state",
    "spark_session",
    "to_json_line",
    "write_savepoint",
]
