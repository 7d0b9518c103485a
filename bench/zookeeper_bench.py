"""ZooKeeper write costs: a plain write vs get_and_increment vs a store add.

Against a real local ZooKeeper started by this script. Each figure is the median over
many runs in one process, printed with its ratio to the plain write (the anchor: one
``set_data`` round trip, the least any durable ZooKeeper change costs).

- ``get_and_increment``: a read plus one fenced transaction (check epoch + CAS set);
- store add without subsumption: one fenced transaction (check epoch + create);
- store add with subsumption (max_retained=1): check epoch + create + delete.

    .venv/bin/python bench/zookeeper_bench.py [--runs 500]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer
from sparkpoint.config import ZooKeeperSettings
from sparkpoint.counter import ZooKeeperCheckpointIDCounter
from sparkpoint.ha import Fence, ZooKeeperConnection, read_epoch
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.store import ZooKeeperCompletedCheckpointStore


def median_ms(runs: int, operation: Callable[[int], object]) -> float:
    samples = []
    for i in range(runs):
        started = time.perf_counter()
        operation(i)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def pointer(job: str, checkpoint_id: int) -> CheckpointPointer:
    return CheckpointPointer(
        job_id=job,
        checkpoint_id=checkpoint_id,
        kind=CheckpointKind.CHECKPOINT,
        trigger_timestamp_ms=checkpoint_id,
        completion_timestamp_ms=checkpoint_id + 1,
        metadata_uri=f"hdfs://nn:8020/cp/{job}/chk-{checkpoint_id}/_metadata",
        state_size=1 << 20,
        metadata_checksum="sha256:" + "0" * 64,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="runs per figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalZooKeeper(tmp) as zk:
        conn = ZooKeeperConnection(ZooKeeperSettings(quorum=zk.connect_string)).start()
        fence = Fence(conn, read_epoch(conn))
        plain_path = f"{conn.paths.base}/plain"
        conn.client.ensure_path(plain_path)
        counter = ZooKeeperCheckpointIDCounter(conn, "bench", fence)
        counter.start()
        keep_all = ZooKeeperCompletedCheckpointStore(conn, "bench-a", fence, max_retained=10**4)
        subsume = ZooKeeperCompletedCheckpointStore(conn, "bench-b", fence, max_retained=1)
        payload = pointer("bench-a", 1).to_bytes()
        # Warm up connections, JIT and the server before measuring.
        for i in range(50):
            conn.client.set(plain_path, payload)
            counter.get_and_increment()
            subsume.add_checkpoint_and_subsume_oldest(pointer("bench-b", i + 1))
        base = 10_000
        figures = {
            "plain set_data (anchor)": median_ms(
                args.runs, lambda _: conn.client.set(plain_path, payload)
            ),
            "get_and_increment": median_ms(args.runs, lambda _: counter.get_and_increment()),
            "store add, no subsumption": median_ms(
                args.runs,
                lambda i: keep_all.add_checkpoint_and_subsume_oldest(pointer("bench-a", base + i)),
            ),
            "store add + subsume oldest": median_ms(
                args.runs,
                lambda i: subsume.add_checkpoint_and_subsume_oldest(pointer("bench-b", base + i)),
            ),
        }
        conn.close()
    anchor = figures["plain set_data (anchor)"]
    print(f"ZooKeeper {zk.connect_string}, {args.runs} runs each, medians")
    print(f"{'operation':32} {'median ms':>10} {'x plain write':>14}")
    for name, value in figures.items():
        print(f"{name:32} {value:10.3f} {value / anchor:14.2f}")


if __name__ == "__main__":
    main()
