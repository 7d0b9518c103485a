"""An alert with a processing-time timeout: a key that sends nothing for ``timeout_ms``
gets one alert.

Every event moves the key's deadline: the timer of the old deadline is deleted and one
at ``now + timeout_ms`` (the epoch's processing time) registered. When a deadline
passes, ``on_timer`` emits ``{"key", "alert": "silent", "deadline", "last_event"}`` and
forgets the deadline, so a silent key is alerted once, and again only after it has sent
something and gone silent again.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedProcessFunction,
    Pipeline,
    RuntimeContext,
    Sink,
    Source,
    ValueStateDescriptor,
)


class SilenceAlert(KeyedProcessFunction):
    def __init__(self, timeout_ms: int) -> None:
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms {timeout_ms} must be positive")
        self.timeout_ms = timeout_ms

    def open(self, ctx: RuntimeContext) -> None:
        self.deadline = ctx.get_state(ValueStateDescriptor("deadline"))
        self.last_event = ctx.get_state(ValueStateDescriptor("last_event"))

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        old = self.deadline.value()
        if old is not None:
            ctx.delete_processing_time_timer(old)
        deadline = ctx.current_processing_time() + self.timeout_ms
        ctx.register_processing_time_timer(deadline)
        self.deadline.update(deadline)
        self.last_event.update(value)

    def on_timer(self, timestamp: int, key: Key, ctx: Context) -> None:
        ctx.collect(
            {
                "key": key,
                "alert": "silent",
                "deadline": timestamp,
                "last_event": self.last_event.value(),
            }
        )
        self.deadline.clear()


def alerts_pipeline(
    job_id: str,
    source: Source,
    sink: Sink,
    key: Any,
    *,
    timeout_ms: int,
    parallelism: int = 2,
) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(source)
        .key_by(key)
        .process(SilenceAlert(timeout_ms), uid="alerts")
        .sink(sink)
    )
