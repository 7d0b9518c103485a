"""How many jobs one leader sustains: the curve of coordinator CPU and checkpoint duration.

One coordinator process (pinned to one core with `taskset` when there are two or more) on a
real local ZooKeeper, its `_metadata` on the local disk. N light drivers — this asyncio
process, pinned to the other core, over 16 keep-alive HTTP connections to the real REST
API — each register a job (a source, a keyed operator, a sink, one subtask each)
checkpointing every 10 s, heartbeat every second and acknowledge each trigger at once.
For N = 100, 250, 500, ... the bench measures, over a steady window: the coordinator's
CPU (its own /proc counters, as a share of one core), completed checkpoints per second,
and checkpoint end-to-end duration (trigger to completion, as the coordinator records it).
It stops at the first N where the CPU saturates or the median duration doubles against
the smallest N (the anchor, measured in the same run).

    .venv/bin/python bench/scale_bench.py [--jobs 100 250 500 1000 1500 2000] [--window 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from sparkpoint.checkpoint import (
    InlineStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
)
from sparkpoint.client.client import state_to_dict
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper, free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SATURATED = 0.95  # share of one core
#: Keep-alive connections the drivers share (uvicorn serves each in turn on one core).
CONNECTIONS = 16


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def pinned(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if shutil.which("taskset") and os.cpu_count() else []


def graph(job_id: str) -> dict[str, object]:
    def op(uid: str, keyed: bool = False) -> dict[str, object]:
        return {"uid": uid, "parallelism": 1, "max_parallelism": 128, "keyed": keyed}

    return {"job_id": job_id, "operators": [op("source"), op("counts", True), op("sink")]}


def ack_body() -> dict[str, object]:
    """What a light keyed subtask acknowledges: 128 key groups of inline state."""
    groups = KeyGroupRange(0, 127)
    handle = KeyGroupsStateHandle(groups, tuple(range(0, 128 * 8, 8)),
                                  InlineStateHandle("counts-0", bytes(128 * 8)))  # fmt: skip
    return {"acks": [
        {"operator_uid": "source", "subtask": 0},
        {"operator_uid": "counts", "subtask": 0,
         "state": state_to_dict(OperatorSubtaskState(keyed=(handle,)))},
        {"operator_uid": "sink", "subtask": 0},
    ]}  # fmt: skip


ACK_BODY = ack_body()


class Drivers:
    """N light drivers in one event loop: heartbeat every second, ack every trigger."""

    def __init__(self, base: str, jobs: list[str], interval_ms: int) -> None:
        self.base, self.jobs, self.interval_ms = base, jobs, interval_ms
        self.completed = 0
        self.heartbeats = 0
        self.errors = 0
        self.stop = asyncio.Event()
        #: Each job's driver run and where its notices begin (from its registration).
        self.runs: dict[str, tuple[str, int]] = {}

    async def run(self, ready: asyncio.Event) -> None:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=self.base, limits=limits, timeout=30.0) as http:
            semaphore = asyncio.Semaphore(32)
            await asyncio.gather(*(self._register(http, semaphore, job) for job in self.jobs))
            ready.set()
        slices = [self.jobs[i::CONNECTIONS] for i in range(min(CONNECTIONS, len(self.jobs)))]
        await asyncio.gather(*(self._drive_slice(jobs) for jobs in slices))

    async def _register(self, http: httpx.AsyncClient, semaphore: asyncio.Semaphore,
                        job: str) -> None:  # fmt: skip
        async with semaphore:
            config = {"interval_ms": self.interval_ms}
            reply = await http.post(
                "/v1/jobs", json={"graph": graph(job), "checkpoint_config": config}
            )
            reply.raise_for_status()
            body = reply.json()
            self.runs[job] = (body["run_id"], body["notification_seq"])

    async def _drive_slice(self, jobs: list[str]) -> None:
        """One keep-alive connection heartbeating ``jobs``, each once a second, and
        acknowledging every trigger at once."""
        host, port = self.base.removeprefix("http://").rsplit(":", 1)
        conn = await HttpConnection.open(host, int(port))
        seqs = {job: self.runs[job][1] for job in jobs}
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                for job in jobs:
                    run_id = self.runs[job][0]
                    try:
                        status, body = await conn.post(
                            f"/v1/jobs/{job}/heartbeat",
                            {"after_seq": seqs[job], "run_id": run_id},
                        )
                        if status != 200:
                            self.errors += 1
                            continue
                        self.heartbeats += 1
                        for notice in body["notifications"]:
                            seqs[job] = max(seqs[job], notice["seq"])
                            if notice["type"] != "trigger":
                                continue
                            status, ack = await conn.post(
                                f"/v1/jobs/{job}/checkpoints/{notice['checkpoint_id']}/acks",
                                {**ACK_BODY, "run_id": run_id},
                            )
                            if status == 200 and ack["status"] == "completed":
                                self.completed += 1
                    except (OSError, ValueError, asyncio.IncompleteReadError):
                        self.errors += 1
                        conn.close()
                        conn = await HttpConnection.open(host, int(port))
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        finally:
            conn.close()


class HttpConnection:
    """A bare HTTP/1.1 keep-alive connection: the load generator must cost far less per
    request than the server it measures (a general-purpose client costs milliseconds per
    request with hundreds in flight, and then the drivers, not the coordinator, saturate).
    Real requests to the real server; only the client is lean."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 host: str) -> None:  # fmt: skip
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, host)

    async def post(self, path: str, body: dict[str, object]) -> tuple[int, dict[str, Any]]:
        payload = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self.writer.write(head.encode() + payload)
        await self.writer.drain()
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        data = await self.reader.readexactly(length) if length else b"{}"
        return status, json.loads(data)

    def close(self) -> None:
        self.writer.close()


async def drive(base: str, jobs: int, interval_ms: int, warmup: float, window: float,
                coordinator_pid: int) -> dict[str, float]:  # fmt: skip
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})  # the coordinator has core 0 to itself
    names = [f"scale-{uuid.uuid4().hex[:6]}-{i}" for i in range(jobs)]
    drivers = Drivers(base, names, interval_ms)
    ready = asyncio.Event()
    task = asyncio.create_task(drivers.run(ready))
    await ready.wait()
    await asyncio.sleep(warmup)
    cpu0, wall0, done0 = cpu_seconds(coordinator_pid), time.monotonic(), drivers.completed
    own0, beats0 = time.process_time(), drivers.heartbeats
    await asyncio.sleep(window)
    cpu1, wall1, done1 = cpu_seconds(coordinator_pid), time.monotonic(), drivers.completed
    own1, beats1 = time.process_time(), drivers.heartbeats
    durations = await checkpoint_durations(base, names[:: max(1, jobs // 50)])
    drivers.stop.set()
    await task
    return {
        "jobs": jobs,
        "cpu_share": (cpu1 - cpu0) / (wall1 - wall0),
        "checkpoints_per_s": (done1 - done0) / (wall1 - wall0),
        "expected_per_s": jobs * 1000 / interval_ms,
        "duration_median_ms": statistics.median(durations) if durations else float("nan"),
        "duration_p95_ms": percentile(durations, 0.95),
        "driver_errors": drivers.errors,
        # The drivers must keep up for the figure to be the coordinator's: one heartbeat
        # per job per second, in a process that is not itself saturated.
        "heartbeats_per_s": (beats1 - beats0) / (wall1 - wall0),
        "drivers_cpu_share": (own1 - own0) / (wall1 - wall0),
    }


async def checkpoint_durations(base: str, jobs: list[str]) -> list[float]:
    durations: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=30.0) as http:
        for job in jobs:
            reply = await http.get(f"/v1/jobs/{job}/checkpoints")
            for entry in reply.json().get("history", []):
                if entry.get("status") == "COMPLETED" and entry.get("end_to_end_duration"):
                    durations.append(float(entry["end_to_end_duration"]))
    return durations


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_coordinator(quorum: str, root: Path, port: int) -> subprocess.Popen[bytes]:
    # A local benchmark on loopback: no tokens.
    command = [*pinned(0), sys.executable, "-m", "sparkpoint", "coordinator", "run",
               "--zookeeper", quorum, "--port", str(port),
               "--set", f"high-availability.cluster-id=scale-{uuid.uuid4().hex[:8]}",
               "--set", f"state.checkpoints.dir={root / 'checkpoints'}",
               "--set", "rest.auth.enabled=false"]  # fmt: skip
    log = (root / "coordinator.log").open("wb")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(base: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the coordinator at {base} never became ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 250, 500, 1000, 1500, 2000])
    parser.add_argument("--interval-ms", type=int, default=10_000)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--window", type=float, default=40.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="sparkpoint-scale-") as tmp:
        root = Path(tmp)
        with LocalZooKeeper(root / "zk", servers=1) as zk:
            for jobs in args.jobs:
                step = root / f"n{jobs}"
                step.mkdir()
                port = free_port()
                coordinator = start_coordinator(zk.connect_string, step, port)
                try:
                    base = f"http://127.0.0.1:{port}"
                    wait_ready(base)
                    row = asyncio.run(drive(base, jobs, args.interval_ms, args.warmup,
                                            args.window, coordinator.pid))  # fmt: skip
                finally:
                    coordinator.terminate()
                    coordinator.wait()
                rows.append(row)
                print(f"{jobs:5d} jobs: coordinator CPU {row['cpu_share']:5.0%} of a core, "
                      f"{row['checkpoints_per_s']:6.1f}/{row['expected_per_s']:.0f} "
                      f"checkpoints/s, duration median {row['duration_median_ms']:6.0f} ms "
                      f"p95 {row['duration_p95_ms']:6.0f} ms; drivers "
                      f"{row['heartbeats_per_s']:.0f} heartbeats/s at "
                      f"{row['drivers_cpu_share']:.0%} CPU", flush=True)  # fmt: skip
                anchor = rows[0]["duration_median_ms"]
                if row["cpu_share"] >= SATURATED or row["duration_median_ms"] >= 2 * anchor:
                    print(f"stop: saturated at {jobs} jobs")
                    break
    anchor = rows[0]["duration_median_ms"]
    print(f"\nanchor: median duration at {rows[0]['jobs']:.0f} jobs, {anchor:.0f} ms")
    print("  jobs  CPU/core  checkpoints/s  of expected  duration/anchor")
    for row in rows:
        print(f"{row['jobs']:6.0f} {row['cpu_share']:8.0%} {row['checkpoints_per_s']:14.1f} "
              f"{row['checkpoints_per_s'] / row['expected_per_s']:12.0%} "
              f"{row['duration_median_ms'] / anchor:15.2f}x")  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
