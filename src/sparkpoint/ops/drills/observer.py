"""Watching a cluster from outside while a drill runs: a thread samples ``leader/info``,
the contenders, every replica's own ``GET /v1/leader`` and the job's retained checkpoints
in ZooKeeper (read-only). Everything a drill measures or checks comes from here, so it
works the same against a local cluster and a remote deployment."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from sparkpoint.ha import HAError, ZooKeeperConnection, list_contenders, read_leader
from sparkpoint.ops.drills.invariants import LeaderSample
from sparkpoint.store import ZooKeeperCompletedCheckpointStore

SAMPLE_INTERVAL_S = 0.05


@dataclass
class Observation:
    """Everything seen so far; appended to by the sampling thread only."""

    samples: list[LeaderSample] = field(default_factory=list)
    # (checkpoint id, seconds since the observer started when its pointer was first seen),
    # in order of appearance; samples use the same clock.
    completions: list[tuple[int, float]] = field(default_factory=list)
    retained: tuple[int, ...] = ()
    #: When (s since the observer started) each checkpoint id was last seen retained: a
    #: directory subsumed a moment ago is young as an orphan, however old its files.
    retained_last_seen: dict[int, float] = field(default_factory=dict)
    leader_epoch: int | None = None
    leader_instance: str | None = None
    leader_address: str | None = None
    errors: int = 0


class ClusterObserver:
    """``addresses()`` gives the REST addresses to ask (local replicas, or the contenders'
    published addresses for a remote deployment)."""

    def __init__(
        self,
        conn: ZooKeeperConnection,
        job_id: str | None,
        addresses: Callable[[], list[str]] | None = None,
    ) -> None:
        self._conn = conn
        self._job_id = job_id
        self._addresses = addresses or self._contender_addresses
        self._store = ZooKeeperCompletedCheckpointStore(conn, job_id, None) if job_id else None
        self._http = httpx.Client(timeout=0.5)
        self._seen: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.obs = Observation()

    def start(self) -> ClusterObserver:
        self._thread = threading.Thread(target=self._run, name="drill-observer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._http.close()

    # --- what drills ask ----------------------------------------------------------------

    def snapshot(self) -> Observation:
        with self._lock:
            return Observation(
                list(self.obs.samples), list(self.obs.completions), self.obs.retained,
                dict(self.obs.retained_last_seen), self.obs.leader_epoch,
                self.obs.leader_instance, self.obs.leader_address, self.obs.errors,
            )  # fmt: skip

    def wall(self, at_s: float | None) -> float | None:
        """A time on the observer's clock as wall-clock seconds (what other processes on
        this machine record), for lining up phases."""
        return None if at_s is None else self.started_wall + at_s

    def completion_ids(self) -> list[int]:
        with self._lock:
            return [cid for cid, _ in self.obs.completions]

    def wait_for(self, condition: Callable[[Observation], object], timeout: float) -> object:
        """The first truthy ``condition(snapshot)`` within ``timeout`` seconds, else None."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition(self.snapshot())
            if value or time.monotonic() > deadline:
                return value or None
            time.sleep(SAMPLE_INTERVAL_S / 2)

    # --- sampling -----------------------------------------------------------------------

    def _contender_addresses(self) -> list[str]:
        try:
            return [c.address for c in list_contenders(self._conn) if c.address.startswith("http")]
        except HAError:
            return []

    def _acting(self, addresses: list[str]) -> tuple[str, ...]:
        acting = []
        for address in addresses:
            try:
                reply = self._http.get(f"{address}/v1/leader")
                this = reply.json().get("this") or {}
            except (httpx.HTTPError, ValueError):
                continue  # stopped, killed or frozen: it cannot act for anyone to see
            if this.get("state") == "leader" and this.get("ready"):
                acting.append(str(this.get("instance_id")))
        return tuple(acting)

    def elapsed(self) -> float:
        """Seconds since the observer started: the clock of its samples and completions,
        for a drill to date its own steps on (never a sample's time: the sampler may wait
        on a read through a whole outage)."""
        return time.monotonic() - self.started

    def _sample(self) -> None:
        now = time.monotonic()
        acting = self._acting(self._addresses())
        try:
            leader = read_leader(self._conn)
            pointers = self._store.recover() if self._store is not None else []
        except HAError:
            # ZooKeeper unreachable (the quorum drill does this on purpose): record what
            # the replicas say, and no leader epoch.
            with self._lock:
                self.obs.errors += 1
                self.obs.samples.append(LeaderSample(now - self.started, None, acting))
            return
        # What the reads saw is dated when they answered: a read that waited through an
        # outage answers with what is there after it.
        seen = time.monotonic()
        with self._lock:
            self.obs.samples.append(
                LeaderSample(now - self.started, leader.epoch if leader else None, acting)
            )
            self.obs.leader_epoch = leader.epoch if leader else None
            self.obs.leader_instance = leader.instance_id if leader else None
            self.obs.leader_address = leader.address if leader else None
            ids = tuple(p.checkpoint_id for p in pointers)
            self.obs.retained = ids
            for cid in ids:
                self.obs.retained_last_seen[cid] = seen - self.started
            for cid in sorted(ids):
                if cid not in self._seen:
                    self._seen.add(cid)
                    self.obs.completions.append((cid, seen - self.started))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(SAMPLE_INTERVAL_S)
