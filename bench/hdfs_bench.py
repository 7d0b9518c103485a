"""HDFS benchmark (not a test): checkpoint state written to and read back from a real HDFS
by sparkpoint's storage, against Hadoop's own ``hdfs dfs -put`` and ``hdfs dfs -cat`` of
the same bytes — same jars, same cluster, same run.

A local HDFS (``LocalHdfs``: a NameNode and 3 DataNodes, replication 3, 128 MiB blocks,
full JIT) is started; for each size, a state file of random bytes is written the way an executor
writes one (``CheckpointLocation.state_output`` → WebHDFS CREATE) and read back the way a
restore reads one (``FileSystem.open_read`` → WebHDFS OPEN), ``--repeat`` times each; then
Hadoop's ``FsShell`` (``org.apache.hadoop.fs.FsShell``, i.e. ``hdfs dfs``) puts and cats
the same bytes. ``hdfs dfs`` starts a JVM per command: its time is shown as measured and
"net", less the same command on an empty file (JVM start and connection set-up). The
figures: MiB/s each way, and sparkpoint's throughput as a ratio of Hadoop's (net).
``--profile`` prints where sparkpoint's client spends the largest write and read.

Run:  .venv/bin/python bench/hdfs_bench.py [--sizes-mib 1,16,64,256] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from sparkpoint.ops.devcluster.hdfs import FS_SHELL_MAIN, LocalHdfs
from sparkpoint.storage import CheckpointStorage

MIB = 1024 * 1024
CHUNK = 4 * MIB


def _write_state(storage: CheckpointStorage, cid: int, data: bytes) -> float:
    location = storage.init_checkpoint("bench", cid)
    started = time.perf_counter()
    stream = location.state_output("op", 0, 0)
    for offset in range(0, len(data), CHUNK):
        stream.write(data[offset : offset + CHUNK])
    stream.close_and_get_handle()
    return time.perf_counter() - started


def _read_state(storage: CheckpointStorage, cid: int) -> tuple[float, int]:
    path = f"{storage.checkpoint_directory('bench', cid)}/op-0-0"
    fs = storage.filesystem(path)
    started = time.perf_counter()
    total = 0
    with fs.open_read(path) as stream:
        while chunk := stream.read(CHUNK):
            total += len(chunk)
    return time.perf_counter() - started, total


def _shell(cluster: LocalHdfs, *args: str) -> float:
    started = time.perf_counter()
    result = cluster.run_tool(FS_SHELL_MAIN, *args, timeout=600, discard_stdout=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"hdfs dfs {' '.join(args)}: {result.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mib", default="1,16,64,256")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mib.split(",")]
    work = Path(tempfile.mkdtemp(prefix="sparkpoint-hdfs-bench-"))
    with LocalHdfs(work / "hdfs", datanodes=3, heap_mb=512, quick_jit=False) as cluster:
        root = f"{cluster.webhdfs_uri}/tmp/bench"
        storage = CheckpointStorage(root, inline_threshold=0)
        rpc_root = f"{cluster.rpc_uri}/tmp/bench-shell"
        empty = work / "empty"
        empty.write_bytes(b"")
        _shell(cluster, "-mkdir", "-p", rpc_root)
        put_empty = statistics.median(
            _shell(cluster, "-put", str(empty), f"{rpc_root}/empty-{i}") for i in range(3)
        )
        cat_empty = statistics.median(
            _shell(cluster, "-cat", f"{rpc_root}/empty-0") for _ in range(3)
        )
        print(f"Hadoop {cluster.status()['version']}, 3 DataNodes, replication "
              f"{cluster.replication}, block {cluster.block_size // MIB} MiB; "
              f"hdfs dfs on an empty file: -put {put_empty:.2f} s, -cat {cat_empty:.2f} s "
              f"(JVM start, subtracted below as 'net')")  # fmt: skip
        print(
            "MiB/s each way; ratio = sparkpoint's throughput / hdfs dfs's, as run and net "
            "(net: less the JVM start; '-' where the transfer is under 0.3 s of it)"
        )
        print(f"{'MiB':>5} | {'write':>13} {'-put':>7} {'net':>7} {'ratio':>6} {'net':>6} | "
              f"{'read':>13} {'-cat':>7} {'net':>7} {'ratio':>6} {'net':>6}")  # fmt: skip
        cid = 0
        for size in sizes:
            data = os.urandom(size * MIB)
            local = work / f"data-{size}"
            local.write_bytes(data)
            writes, reads, puts, cats = [], [], [], []
            for i in range(args.repeat):
                cid += 1
                writes.append(_write_state(storage, cid, data))
                elapsed, total = _read_state(storage, cid)
                assert total == len(data)
                reads.append(elapsed)
                target = f"{rpc_root}/data-{size}-{i}"
                puts.append(_shell(cluster, "-put", str(local), target))
                cats.append(_shell(cluster, "-cat", target))
            w, r = statistics.median(writes), statistics.median(reads)
            p, c = statistics.median(puts), statistics.median(cats)
            print(f"{size:>5} | {size / w:>7.1f} MiB/s {size / p:>7.1f} {_net(size, p, put_empty)} "
                  f"{p / w:>5.2f}x {_net_ratio(p, put_empty, w)} | {size / r:>7.1f} MiB/s "
                  f"{size / c:>7.1f} {_net(size, c, cat_empty)} {c / r:>5.2f}x "
                  f"{_net_ratio(c, cat_empty, r)}")  # fmt: skip
        if args.profile:
            data = os.urandom(sizes[-1] * MIB)
            cid += 1
            _profile("sparkpoint write", lambda: _write_state(storage, cid, data))
            _profile("sparkpoint read", lambda: _read_state(storage, cid))


def _net(size: int, elapsed: float, start: float) -> str:
    return f"{size / (elapsed - start):>7.1f}" if elapsed - start >= 0.3 else f"{'-':>7}"


def _net_ratio(elapsed: float, start: float, ours: float) -> str:
    return f"{(elapsed - start) / ours:>5.2f}x" if elapsed - start >= 0.3 else f"{'-':>6}"


def _profile(what: str, action: object) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(action)  # type: ignore[arg-type]
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
    print(f"\n--- profile: {what} (top 8 by own time) ---")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:3000])


if __name__ == "__main__":
    main()
