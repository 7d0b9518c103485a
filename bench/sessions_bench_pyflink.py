"""The PyFlink side of bench/sessions_bench.py, run with the python of PyFlink's own
virtualenv (apache-flink pins numpy, pyarrow and py4j that PySpark 4.3 does not accept):

    sessions_bench_pyflink.py WORKLOAD_JSON WORK_DIR CHECKPOINT_INTERVAL_MS [OPTIONS_JSON]

(``OPTIONS_JSON``: more Flink settings by their own names, for trying them by hand.)

PyFlink 2.3's DataStream API in a local MiniCluster, parallelism 4: the click generator
runs in a Python ``map`` over Flink's number sequence source (source subtask ``s`` reads
numbers ``s·n … (s+1)·n - 1``, which become clicks ``0 … n - 1`` of generator split ``s``),
a bounded-out-of-orderness watermark from the click's ``ts`` (a Python timestamp
assigner), ``EventTimeSessionWindows`` with a Python ``AggregateFunction`` (clicks,
amount) and a ``ProcessWindowFunction`` for the key and the window's bounds, into a
``FileSink`` (committed at checkpoints; the end of input takes a last one). The end of
input moves the watermark to +∞, which fires the sessions still open.

Prints one ``RESULT {json}`` line (bench/state_bench_common.py's ``report``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Duration, Encoder, Types, WatermarkStrategy
from pyflink.common.time import Time
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.functions import AggregateFunction, MapFunction, ProcessWindowFunction
from pyflink.datastream.window import EventTimeSessionWindows
from pyflink.version import __version__ as pyflink_version

from sessions_bench_common import OUT_OF_ORDERNESS_MS, PARALLELISM, SPLITS, Workload
from state_bench_common import report

CLICK = Types.TUPLE([Types.STRING(), Types.LONG(), Types.STRING(), Types.LONG()])


class ToClick(MapFunction):
    """Number ``g`` of the sequence → click ``g mod n`` of generator split ``g div n``."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    def open(self, runtime_context: Any) -> None:
        self.reader = self.workload.reader()

    def map(self, value: int) -> tuple[str, int, str, int]:
        split, index = divmod(value, self.workload.per_split)
        click = self.reader.event(split, index)
        return click["user"], click["ts"], click["page"], click["amount"]


class ClickTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value[1]


class SessionSummary(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return 0, 0  # clicks, amount

    def add(self, value: Any, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator[0] + 1, accumulator[1] + value[3]

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return a[0] + b[0], a[1] + b[1]

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator


class SessionLine(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        window = context.window()
        for clicks, amount in elements:
            session = {"user": key, "start": window.start, "end": window.end}
            yield json.dumps({**session, "clicks": clicks, "amount": amount})


def main() -> None:
    workload, work = Workload.from_json(sys.argv[1]), Path(sys.argv[2])
    interval_ms = int(sys.argv[3])
    config = Configuration()
    config.set_string("python.executable", sys.executable)
    config.set_string("python.client.executable", sys.executable)
    config.set_string("execution.checkpointing.dir", (work / "ckpt").as_uri())
    config.set_string("taskmanager.numberOfTaskSlots", str(PARALLELISM))
    for name, value in json.loads(sys.argv[4] if len(sys.argv) > 4 else "{}").items():
        config.set_string(name, value)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(PARALLELISM)
    env.enable_checkpointing(interval_ms)
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(OUT_OF_ORDERNESS_MS)
    ).with_timestamp_assigner(ClickTime())
    numbers = NumberSequenceSource(0, workload.per_split * SPLITS - 1)
    (
        env.from_source(numbers, WatermarkStrategy.no_watermarks(), "numbers")
        .map(ToClick(workload), output_type=CLICK)
        .assign_timestamps_and_watermarks(watermarks)
        .key_by(lambda click: click[0], key_type=Types.STRING())
        .window(EventTimeSessionWindows.with_gap(Time.milliseconds(workload.gap_ms)))
        .aggregate(
            SessionSummary(),
            window_function=SessionLine(),
            accumulator_type=Types.TUPLE([Types.LONG(), Types.LONG()]),
            output_type=Types.STRING(),
        )
        .sink_to(
            FileSink.for_row_format(str(work / "out"), Encoder.simple_string_encoder()).build()
        )
    )
    started = time.perf_counter()
    result = env.execute("sessions-bench")
    seconds = time.perf_counter() - started
    report(
        {
            "seconds": result.get_net_runtime() / 1000,
            "execute_s": seconds,
            "version": pyflink_version,
        }
    )


if __name__ == "__main__":
    main()
