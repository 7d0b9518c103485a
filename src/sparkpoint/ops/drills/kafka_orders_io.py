"""``python -m sparkpoint.ops.drills.kafka_orders_io``: the Kafka workload's input and its
check, as processes of their own (only they load the pipeline package; the drill process
never imports it).

- ``topics``: create the input and output topics.
- ``feed``: publish the orders example's records in batches until SIGTERM; after each
  batch the brokers acknowledged, the count published so far is appended to
  ``--published`` (the last line is what the check expects).
- ``read``: the output topic read ``read_committed``, as JSON on stdout: the ids
  committed (one per output row, duplicates kept), the ids expected for ``--published``
  records, and the keys whose running count is not exactly 1..n.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from types import FrameType

#: Distinct keys of the published records (the job's keyed state).
KEYS = 50


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("topics", "feed", "read"))
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input-topic", default="orders")
    p.add_argument("--output-topic", default="orders-seen")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--published", help="feed: the count file it appends to; read: the count")
    p.add_argument("--batch", type=int, default=40)
    # 40 records a second: well below what the job reads on a loaded 2-core machine, so
    # that the backlog a fault leaves is caught up with.
    p.add_argument("--pause-s", type=float, default=1.0)
    args = p.parse_args(argv)
    from sparkpoint.examples import kafka_orders
    from sparkpoint.examples.orders import check_rows, message

    if args.command == "topics":
        topics = {args.input_topic: args.partitions, args.output_topic: args.partitions}
        kafka_orders.create_topics(args.bootstrap, topics)
        return 0
    if args.command == "feed":
        stop = threading.Event()

        def request_stop(signum: int, frame: FrameType | None) -> None:
            stop.set()  # the batch being published is finished first

        signal.signal(signal.SIGTERM, request_stop)
        sent = 0
        while not stop.is_set():
            kafka_orders.publish(args.bootstrap, args.input_topic, sent, args.batch, KEYS)
            sent += args.batch
            with open(args.published, "a") as f:
                f.write(f"{sent}\n")
            stop.wait(args.pause_s)  # the feed's pace, not a synchronisation
        return 0
    published = int(args.published or 0)
    rows = [(r[0], r[1], r[2]) for r in kafka_orders.read_committed(args.bootstrap,
                                                                    args.output_topic)]  # fmt: skip
    expected = [message(i, KEYS)[0] for i in range(published)]
    json.dump({"committed": [r[0] for r in rows], "expected": expected,
               "bad_keys": check_rows(expected, rows).bad_keys}, sys.stdout)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
