"""Snapshots, restore and the sink on the suite's real HDFS (over WebHDFS): executors
write and read state files and sink files through sparkpoint's storage, not the local disk."""

from __future__ import annotations

import uuid
from typing import Any

from sparkpoint.ops.devcluster.hdfs import LocalHdfs
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.storage import filesystem_for
from tests.pipeline import support

MANUAL = 3_600_000


def test_crash_and_rescaled_restore_with_everything_on_hdfs(
    spark: Any, hdfs_cluster: LocalHdfs
) -> None:
    # Executors write as the OS user, which is HDFS' superuser on the suite's cluster.
    base = f"{hdfs_cluster.webhdfs_uri}/tmp/{uuid.uuid4().hex}"
    out, ckpt = f"{base}/out", f"{base}/ckpt"
    p = support.pipeline("hdfs", out, 4)
    channel = EmbeddedChannel(ckpt, interval_ms=MANUAL)
    driver = PipelineDriver(p, spark, channel, inline_threshold=0)
    driver.start()
    driver.run(max_epochs=2)
    channel.trigger_checkpoint()
    driver.run(max_epochs=2)
    assert driver.status.acknowledged == [1]
    driver.close()  # a crash
    state_files = filesystem_for(ckpt).list(f"{ckpt}/hdfs/chk-1")
    assert any(f.name.startswith("process-") and f.size > 0 for f in state_files)

    p2 = support.pipeline("hdfs", out, 3)
    driver2 = PipelineDriver(p2, spark, EmbeddedChannel(ckpt, interval_ms=MANUAL))
    assert driver2.start() is not None
    driver2.run()
    driver2.finish()
    driver2.close()
    assert support.committed(p2) == support.expected()
