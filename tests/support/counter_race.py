"""One racer of the counter race test: N get_and_increment calls, ids to a file.

Run as ``python -m tests.support.counter_race QUORUM CLUSTER_ID JOB N OUT``; it waits for
``OUT.go`` to appear so that all racers start together.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.counter import ZooKeeperCheckpointIDCounter
from sparkpoint.ha import Fence, ZooKeeperConnection, read_epoch


def main() -> None:
    quorum, cluster_id, job, count, out = sys.argv[1:6]
    conn = ZooKeeperConnection(
        ZooKeeperSettings(quorum=quorum, cluster_id=cluster_id, retry_wait_s=0.01)
    ).start()
    counter = ZooKeeperCheckpointIDCounter(conn, job, Fence(conn, read_epoch(conn)))
    counter.start()
    go = Path(f"{out}.go")
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    ids = [counter.get_and_increment() for _ in range(int(count))]
    Path(out).write_text("\n".join(map(str, ids)))
    conn.close()


if __name__ == "__main__":
    main()
