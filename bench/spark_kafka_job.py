"""The Spark Structured Streaming side of bench/kafka_bench.py, as a process (killed with
kill -9 and started again on the same checkpointLocation): Kafka → a keyed running count
with ``applyInPandasWithState`` → Kafka, through Spark's own Kafka connector
(``spark-sql-kafka``, the `spark-kafka` set of sparkpoint.ops.devcluster.jvm). Spark's Kafka sink is
at least once: a restarted query writes the last micro-batch again.

Run:  python bench/spark_kafka_job.py BOOTSTRAP INPUT OUTPUT CHECKPOINT_DIR TRIGGER_S
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from sparkpoint.ops.devcluster.jvm import classpath

STATE = "count long"
OUT = "id string, key string, seq long, amount long"


def count_per_key(key: tuple[str], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """The orders job's CountPerKey: one output per record, ``seq`` the key's count."""
    import pandas as pd

    (k,) = key
    (count,) = state.get if state.exists else (0,)
    rows = pd.concat(list(frames)).sort_values(["partition", "offset"])
    seqs = list(range(count + 1, count + len(rows) + 1))
    state.update((count + len(rows),))
    yield pd.DataFrame(
        {"id": rows["id"].values, "key": k, "seq": seqs, "amount": rows["amount"].values}
    )


def main(bootstrap: str, source: str, out: str, checkpoint: str, trigger_s: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need pandas, pyarrow
    jars = ",".join(str(j) for j in classpath("spark-kafka"))
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark-kafka")
        .config("spark.jars", jars)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    schema = "id string, key string, amount long"
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select(
            F.from_json(F.col("value").cast("string"), schema).alias("r"),
            "partition",
            "offset",
        )
        .select("r.*", "partition", "offset")
    )
    counted = records.groupBy("key").applyInPandasWithState(
        count_per_key, OUT, STATE, "append", GroupStateTimeout.NoTimeout
    )
    query = (
        counted.select(
            F.to_json(
                F.array(*(F.col(c).cast("string") for c in ("id", "key", "seq", "amount")))
            ).alias("value")
        )
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{float(trigger_s):g} seconds")
        .start()
    )
    print(json.dumps({"event": "started", "pid": os.getpid()}), flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
