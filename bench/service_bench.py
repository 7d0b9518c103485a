"""Service benchmarks against a real ZooKeeper (not a test).

1. Coordinator-side overhead per checkpoint — last acknowledgement received → durable in
   ZooKeeper — with 8, 128 and 1024 subtasks, as a ratio to the unavoidable work timed in
   the same run: counter write + `_metadata` write and rename + store transaction, all
   against the same real ZooKeeper and disk. The method is ``coordinator_bench``'s, with the
   ZooKeeper counter and store swapped in; the last acknowledgement is also timed through
   the REST API of a running replica (HTTP parsing, validation, reply included).
2. kill -9 failover: time from killing the leader process to the first checkpoint
   completed by the new leader, as a ratio to the configured session timeout; a driver
   thread checkpoints every 100 ms through the client.

Run from the repository root:

    .venv/bin/python bench/service_bench.py [--rounds 20] [--subtasks 8 128 1024]
        [--failovers 3] [--session-timeout 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import coordinator_bench as cb
from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.config import ZooKeeperSettings, load_config
from sparkpoint.counter import ZooKeeperCheckpointIDCounter
from sparkpoint.ha import Fence, ZooKeeperConnection, read_epoch
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, free_port
from sparkpoint.service import start_service
from sparkpoint.store import ZooKeeperCompletedCheckpointStore

_connections: list[ZooKeeperConnection] = []


def zookeeper_factory(quorum: str):  # type: ignore[no-untyped-def]
    """Counter and store of one bench job, each call in a fresh cluster id (its own znodes)."""
    job_of = {"n": 0}

    def make():  # type: ignore[no-untyped-def]
        settings = ZooKeeperSettings(quorum=quorum, cluster_id=f"b-{uuid.uuid4().hex[:8]}")
        conn = ZooKeeperConnection(settings).start()
        _connections.append(conn)
        fence = Fence(conn, read_epoch(conn))
        job = job_of["job"]
        counter = ZooKeeperCheckpointIDCounter(conn, job, fence)
        counter.start()
        return counter, ZooKeeperCompletedCheckpointStore(conn, job, fence, max_retained=1)

    return make, job_of


def coordinator_overhead(quorum: str, subtasks: list[int], rounds: int, root: Path) -> None:
    make, job_of = zookeeper_factory(quorum)
    cb.make_counter_and_store = make  # the seam coordinator_bench leaves for this
    print("1. last ack → durable in ZooKeeper (median of rounds; ms)")
    print(
        f"{'subtasks':>8} {'coordinator':>12} {'of it _metadata+store':>22} {'overhead':>9} "
        f"{'unavoidable':>12} {'overhead/unavoidable':>21} {'total/unavoidable':>18} "
        f"{'via HTTP':>9} {'HTTP/unavoidable':>17}"
    )
    for n in subtasks:
        job_of["job"] = cb.graph_for(n).job_id
        r = cb.bench(n, rounds, root / f"c{n}")
        http_ms = last_ack_over_http(quorum, n, rounds, root / f"h{n}")
        print(
            f"{n:>8} {r['finalize_ms']:>12.2f} {r['io_in_call_ms']:>22.2f} "
            f"{r['overhead_ms']:>9.2f} {r['unavoidable_ms']:>12.2f} "
            f"{r['overhead_ratio']:>21.2f} {r['finalize_ratio']:>18.2f} "
            f"{http_ms:>9.2f} {http_ms / r['unavoidable_ms']:>17.2f}"
        )


def last_ack_over_http(quorum: str, subtasks: int, rounds: int, root: Path) -> float:
    """Median ms of the HTTP request carrying a checkpoint's last acknowledgement."""
    config = load_config(
        overrides={
            "high-availability.zookeeper.quorum": quorum,
            "high-availability.cluster-id": f"h-{uuid.uuid4().hex[:8]}",
            "rest.port": "0",
            "rest.auth.enabled": "false",  # a local benchmark on loopback
            "state.checkpoints.dir": str(root),
        },
        environ={},
    )
    service = start_service(config)
    graph = cb.graph_for(subtasks)
    acks = [
        (op.uid, i, cb.subtask_state(op, i))
        for op in graph.operators
        for i in range(op.parallelism)
    ]
    times = []
    try:
        with CoordinatorClient(service.address, retry_for_s=30) as client:
            client.register_job(graph, {"interval_ms": 3_600_000})
            for _ in range(rounds + 1):
                cid = client.trigger_checkpoint(graph.job_id)
                client.acknowledge(graph.job_id, cid, acks[:-1])
                start = time.perf_counter()
                reply = client.acknowledge(graph.job_id, cid, acks[-1:])
                times.append(time.perf_counter() - start)
                assert reply["status"] == "completed", reply
    finally:
        service.stop()
    return statistics.median(times[1:]) * 1e3


# --- failover ---------------------------------------------------------------------------


def spawn(quorum: str, cluster: str, name: str, root: Path, session_s: float, takeover_s: float):  # type: ignore[no-untyped-def]
    port = free_port()
    cmd = [
        str(Path(sys.executable).parent / "sparkpoint"), "coordinator", "run",
        "--zookeeper", quorum, "--cluster-id", cluster, "--port", str(port),
        "--set", f"high-availability.instance-id={name}",
        "--set", f"high-availability.zookeeper.client.session-timeout={session_s} s",
        "--set", "high-availability.lease.renew-interval=100 ms",
        "--set", f"high-availability.lease.takeover-timeout={takeover_s} s",
        "--set", f"state.checkpoints.dir={root}",
        "--set", "rest.auth.enabled=false",
    ]  # fmt: skip
    log = open(root.parent / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), f"127.0.0.1:{port}"


def one_failover(
    quorum: str, root: Path, session_s: float, takeover_s: float, sig: int = signal.SIGKILL
) -> float:
    """Seconds from signalling the leader to the first completion by the new leader."""
    cluster = f"f-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    procs = [spawn(quorum, cluster, f"r{i}", root / "chk", session_s, takeover_s) for i in range(2)]
    addresses = [a for _, a in procs]
    graph = cb.graph_for(8)
    acks = [
        (op.uid, i, cb.subtask_state(op, i))
        for op in graph.operators
        for i in range(op.parallelism)
    ]
    completed: list[tuple[int, float]] = []  # (epoch, when)
    stop = threading.Event()
    client = CoordinatorClient(addresses, timeout_s=2, retry_for_s=60)

    def drive() -> None:
        seq = 0
        while not stop.is_set():
            try:
                beat = client.heartbeat(graph.job_id, seq)
            except ClientError:
                continue
            for n in beat.notifications:
                seq = max(seq, n.seq)
                if n.type == "trigger":
                    with contextlib.suppress(ClientError):
                        client.acknowledge(graph.job_id, n.checkpoint_id, acks)
                elif n.type == "complete":
                    completed.append((beat.leader_epoch, time.monotonic()))
            stop.wait(0.01)

    try:
        client.register_job(graph, {"interval_ms": 100})
        thread = threading.Thread(target=drive, daemon=True)
        thread.start()
        while len(completed) < 5:
            time.sleep(0.05)
        leader = client.leader()["leader"]
        epoch = leader["epoch"]
        victim = next(p for p, a in procs if leader["address"].endswith(a))
        killed = time.monotonic()
        os.kill(victim.pid, sig)
        while not any(e > epoch for e, _ in completed):
            time.sleep(0.01)
        first = min(t for e, t in completed if e > epoch)
        stop.set()
        thread.join(10)
        return first - killed
    finally:
        client.close()
        for p, _ in procs:
            p.kill()
            p.wait(10)


def failover(quorum: str, runs: int, session_s: float, takeover_s: float, root: Path) -> None:
    how = f"lease takeover {takeover_s:g} s" if takeover_s else "no lease: session expiry"
    print(f"\n2. kill -9 -> first checkpoint by the new leader (session {session_s:g} s, {how})")
    times = [one_failover(quorum, root / f"f{i}", session_s, takeover_s) for i in range(runs)]
    for t in times:
        print(f"   {t:6.2f} s  = {t / session_s:.2f} x session timeout")
    med = statistics.median(times)
    print(f"   median {med:.2f} s = {med / session_s:.2f} x session timeout")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--subtasks", type=int, nargs="+", default=[8, 128, 1024])
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--session-timeout", type=float, default=2.0)
    parser.add_argument(
        "--takeover-timeouts",
        type=float,
        nargs="+",
        default=[0.0, 1.0],
        help="lease takeover timeouts to measure failover with (0: no lease)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkpoint-service-bench-") as tmp:
        root = Path(tmp)
        with LocalZooKeeper(root / "zk", servers=1, tick_time_ms=200) as zk:
            coordinator_overhead(zk.connect_string, args.subtasks, args.rounds, root)
            for takeover in args.takeover_timeouts:
                failover(
                    zk.connect_string,
                    args.failovers,
                    args.session_timeout,
                    takeover,
                    root / f"t{takeover:g}",
                )
            for conn in _connections:
                conn.close()


if __name__ == "__main__":
    main()
