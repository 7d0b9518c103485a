"""``<job>/shared/`` (incremental keyed state) against the leader's collector and the end
of a job, on a real ZooKeeper, a coordinator replica in this process (its term and
cleanup worker within reach), real files and requests through the real REST API:

- no checkpoint timeout may outlive the grace period (refused at registration and at
  start, naming both settings),
- a pending checkpoint's acknowledged uploads stay while it can still complete,
- the uploads of the snapshot a driver acknowledged last stay though its checkpoint
  never completed (the driver rebuilds a lost executor's state from it),
- an ended job's shared files go with it, but not those of the job registered again
  under the same id.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sparkpoint.checkpoint import (
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InlineStateHandle,
    JobGraph,
    KeyGroupRange,
    OperatorSubtaskState,
    StoreFile,
)
from sparkpoint.client import ClientError, CoordinatorClient
from sparkpoint.service import Service
from sparkpoint.storage.shared_files import check_job_shared_files, read_checkpoint
from sparkpoint.store import ZooKeeperCompletedCheckpointStore
from tests.support.waiting import wait_until

from .support import SPARKPOINT, make_graph, start_in_process
from .test_incarnations import hold_cleanup, leading_term

JOB = "sessions"
HOUR_MS = 3_600_000


def settings(grace: str, **extra: str) -> dict[str, str]:
    return {
        "state.checkpoints.num-retained": "1",
        # The periodic scan stays out of the way: the tests ask for one.
        "state.checkpoints.orphan-cleanup.interval": "1 h",
        "state.checkpoints.orphan-cleanup.grace-period": grace,
        "execution.checkpointing.timeout": grace,
        **extra,
    }


@pytest.fixture
def serve(tmp_path, zk_server, cluster_id) -> Iterator[Callable[[str], Service]]:
    started: list[Service] = []

    def start(grace: str) -> Service:
        service = start_in_process(tmp_path, zk_server.connect_string, cluster_id, settings(grace))
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def upload(job_dir: Path, name: str) -> Path:
    """A shared file as a snapshot task uploads it."""
    path = job_dir / "shared" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"sst" * 100)
    return path


def incremental(subtask: int, parallelism: int, files: list[Path]) -> OperatorSubtaskState:
    """A RocksDB snapshot's state of ``subtask`` referencing ``files`` in shared/."""
    start = -(-subtask * 128 // parallelism)
    end = -(-(subtask + 1) * 128 // parallelism) - 1
    groups = KeyGroupRange(start, end)
    handle = IncrementalKeyedStateHandle(
        groups,
        groups,
        f"instance-{subtask}",
        tuple(
            StoreFile(f"{n:06d}.sst", FileStateHandle(str(f), f.stat().st_size))
            for n, f in enumerate(files)
        ),
        (StoreFile("CURRENT", InlineStateHandle("CURRENT", b"MANIFEST-1\n")),),
    )
    return OperatorSubtaskState(keyed=(handle,))


def acks(
    graph: JobGraph, files: dict[int, list[Path]], only: set[int] | None = None
) -> list[tuple[str, int, OperatorSubtaskState]]:
    """The acknowledgements of every subtask (of the keyed operator's subtasks ``only``,
    when given): the keyed one's subtask i references ``files[i]``."""
    result = []
    for op in graph.operators:
        for i in range(op.parallelism):
            if op.keyed and (only is None or i in only):
                result.append((op.uid, i, incremental(i, op.parallelism, files.get(i, []))))
            elif not op.keyed and only is None:
                result.append((op.uid, i, OperatorSubtaskState()))
    return result


def keyed_uid(graph: JobGraph) -> str:
    return next(op.uid for op in graph.operators if op.keyed)


def collect(service: Service) -> None:
    report = leading_term(service).orphans.collect(dry_run=False)
    assert all(job.error is None for job in report.jobs), report.to_dict()


def wait_past(seconds: float, since: float) -> None:
    """Until the collector's grace period has passed since ``since`` (wall clock)."""
    wait_until(lambda: time.time() - since > seconds, timeout=seconds + 60,
               message=f"{seconds:g} s passed")  # fmt: skip


def missing_after_completion(service: Service, observer, tmp_path: Path) -> tuple[str, ...]:
    """The shared files the job's retained checkpoints reference but are gone."""
    storage = leading_term(service).storage
    pointers = ZooKeeperCompletedCheckpointStore(observer, JOB, None).recover()
    checkpoints = [
        read_checkpoint(storage.filesystem(p.metadata_uri), p.metadata_uri) for p in pointers
    ]
    fs = storage.filesystem(storage.checkpoint_dir)
    report = check_job_shared_files(fs, storage.checkpoint_dir, JOB, checkpoints,
                                    now_ms=0, grace_ms=HOUR_MS)  # fmt: skip
    return report.missing


# --- 1. the checkpoint timeout and the grace period -------------------------------------


def test_a_checkpoint_timeout_beyond_the_grace_period_is_refused_at_registration(
    serve,
) -> None:
    service = serve("1 s")
    graph = make_graph(JOB)
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        for config in ({"timeout_ms": 120_000}, {"execution.checkpointing.timeout": 120_000}):
            with pytest.raises(ClientError) as refused:
                client.register_job(graph, {"interval_ms": HOUR_MS, **config})
            assert refused.value.status == 400
            message = refused.value.message
            (key,) = config
            assert f"{key}=120000" in message, message
            assert "state.checkpoints.orphan-cleanup.grace-period (1000 ms)" in message, message
        assert leading_term(service).registry.get(JOB) is None  # nothing was written
        client.register_job(graph, {"interval_ms": HOUR_MS, "timeout_ms": 1000})


def test_a_default_checkpoint_timeout_beyond_the_grace_period_refuses_to_start(
    tmp_path,
) -> None:
    result = subprocess.run(
        [
            SPARKPOINT, "coordinator", "run", "--embedded", "--port", "0",
            "--set", f"state.checkpoints.dir={tmp_path}",
            "--set", "state.checkpoints.orphan-cleanup.grace-period=1 s",
            "--set", "execution.checkpointing.timeout=2 min",
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "execution.checkpointing.timeout='120000 ms'" in result.stderr, result.stderr
    assert "state.checkpoints.orphan-cleanup.grace-period (1000 ms)" in result.stderr


def test_a_job_registered_with_a_longer_timeout_resumes_with_it_cut_to_the_grace_period(
    serve,
) -> None:
    first = serve("1 min")
    graph = make_graph(JOB)
    with CoordinatorClient(first.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": HOUR_MS, "timeout_ms": 60_000})
    first.stop()
    # The grace period lowered since: the job is resumed (not dropped), its checkpoints
    # expiring within the new grace period; registering the old timeout is refused.
    second = serve("10 s")
    session = leading_term(second).session(JOB)
    assert session.coordinator.options.timeout_ms == 10_000
    with CoordinatorClient(second.address, retry_for_s=10) as client:
        with pytest.raises(ClientError, match="grace-period"):
            client.register_job(graph, {"interval_ms": HOUR_MS, "timeout_ms": 60_000})
        client.register_job(graph, {"interval_ms": HOUR_MS, "timeout_ms": 10_000})


def test_a_pending_checkpoints_acknowledged_uploads_outlive_the_grace_period(
    serve, observer, tmp_path
) -> None:
    grace_s = 10.0
    service = serve(f"{grace_s:g} s")
    graph = make_graph(JOB)
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": HOUR_MS})
        # Subtask 0's upload, its modification time well before the trigger (the
        # storage's clock behind the coordinator's), seen unreferenced a grace period ago.
        early = upload(job_dir, "count-instance-0-000000.sst-1")
        os.utime(early, (time.time() - 3600, time.time() - 3600))
        seen = time.time()
        collect(service)
        wait_past(grace_s, seen)

        checkpoint_id = client.trigger_checkpoint(JOB)
        late = upload(job_dir, "count-instance-1-000000.sst-2")
        files = {0: [early], 1: [late]}
        reply = client.acknowledge(JOB, checkpoint_id, acks(graph, files, only={0}))
        assert reply["status"] == "pending", reply
        collect(service)
        assert early.is_file(), "an acknowledged upload of a pending checkpoint was deleted"

        rest = [a for a in acks(graph, files) if (a[0], a[1]) != (keyed_uid(graph), 0)]
        assert client.acknowledge(JOB, checkpoint_id, rest)["status"] == "completed"
    assert missing_after_completion(service, observer, tmp_path) == ()


# --- 2. the snapshot the driver acknowledged last ----------------------------------------


def test_the_last_acknowledged_snapshots_uploads_stay_though_it_never_completed(
    serve, observer, tmp_path
) -> None:
    grace_s = 2.0
    service = serve(f"{grace_s:g} s")
    graph = make_graph(JOB)
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": HOUR_MS, "tolerable_failures": 10})
        checkpoint_id = client.trigger_checkpoint(JOB)
        snapshot = {0: [upload(job_dir, "count-instance-0-a")],
                    1: [upload(job_dir, "count-instance-1-a")]}  # fmt: skip
        # The storage refuses its `_metadata` (one is in the way): acknowledged in full,
        # never completed — yet the driver reads its running state back from it.
        (job_dir / f"chk-{checkpoint_id}" / "_metadata").write_bytes(b"in the way")
        reply = client.acknowledge(JOB, checkpoint_id, acks(graph, snapshot))
        assert reply["status"] != "completed", reply
        seen = time.time()
        collect(service)
        wait_past(grace_s, seen)
        collect(service)
        for path in (*snapshot[0], *snapshot[1]):
            assert path.is_file(), f"{path.name} of the driver's latest snapshot was deleted"

        # A newer snapshot acknowledged (and completed): the old uploads are garbage now.
        newer = client.trigger_checkpoint(JOB)
        files = {0: [upload(job_dir, "count-instance-0-b")],
                 1: [upload(job_dir, "count-instance-1-b")]}  # fmt: skip
        assert client.acknowledge(JOB, newer, acks(graph, files))["status"] == "completed"
        seen = time.time()
        collect(service)
        wait_past(grace_s, seen)
        collect(service)
        assert not any(path.exists() for path in (*snapshot[0], *snapshot[1]))
    assert missing_after_completion(service, observer, tmp_path) == ()


# --- 3. the end of a job -----------------------------------------------------------------


def test_an_ended_jobs_shared_files_go_but_not_those_of_its_next_incarnation(
    serve, observer, tmp_path
) -> None:
    service = serve("1 min")
    graph = make_graph(JOB)
    job_dir = tmp_path / "checkpoints" / JOB
    savepoint = tmp_path / "savepoints" / "savepoint-1" / "_metadata"
    savepoint.parent.mkdir(parents=True)
    savepoint.write_bytes(b"a user's savepoint")
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": HOUR_MS})
        first = client.trigger_checkpoint(JOB)
        old = {0: [upload(job_dir, "count-instance-0-old")],
               1: [upload(job_dir, "count-instance-1-old")]}  # fmt: skip
        assert client.acknowledge(JOB, first, acks(graph, old))["status"] == "completed"

        gate = hold_cleanup(service)  # a slow storage: the end's deletions wait
        client.cancel_job(JOB)
        wait_until(
            lambda: observer.client.exists(observer.paths.job(JOB)) is None,
            timeout=60,
            message="the cancelled job's record removed",
        )
        # Registered again before the ended run's deletions ran; its uploads land in the
        # same shared/ and must survive them.
        client.register_job(graph, {"interval_ms": HOUR_MS})
        again = client.trigger_checkpoint(JOB)
        new = {0: [upload(job_dir, "count-instance-0-new")],
               1: [upload(job_dir, "count-instance-1-new")]}  # fmt: skip
        assert client.acknowledge(JOB, again, acks(graph, new))["status"] == "completed"

        gate.set()
        assert service.replica.cleanup.wait_idle(60)
        assert not any(path.exists() for path in (*old[0], *old[1]))
        assert all(path.is_file() for path in (*new[0], *new[1]))
        assert savepoint.is_file()
        assert missing_after_completion(service, observer, tmp_path) == ()

        # And the job ending for good takes its shared/ with it.
        client.cancel_job(JOB)
        wait_until(
            lambda: observer.client.exists(observer.paths.job(JOB)) is None,
            timeout=60,
            message="the cancelled job's record removed",
        )
        assert service.replica.cleanup.wait_idle(60)
        assert list((job_dir / "shared").iterdir()) == []
        assert not list(job_dir.glob("chk-*"))
        assert savepoint.is_file()


def test_the_collector_deletes_what_an_ended_jobs_removal_left_in_shared(
    serve, observer, tmp_path
) -> None:
    service = serve("2 s")
    graph = make_graph(JOB)
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": HOUR_MS})
        checkpoint_id = client.trigger_checkpoint(JOB)
        files = {0: [upload(job_dir, "count-instance-0-x")],
                 1: [upload(job_dir, "count-instance-1-x")]}  # fmt: skip
        assert client.acknowledge(JOB, checkpoint_id, acks(graph, files))["status"] == "completed"
        # The end's deletions never run (a storage that fails them, held here).
        gate = hold_cleanup(service)
        client.cancel_job(JOB)
        wait_until(
            lambda: observer.client.exists(observer.paths.job(JOB)) is None,
            timeout=60,
            message="the cancelled job's record removed",
        )
        paths = [*files[0], *files[1]]
        for path in paths:
            os.utime(path, (time.time() - 60, time.time() - 60))  # older than the grace
        term = leading_term(service)
        (dry,) = term.orphans.collect(dry_run=True).jobs
        assert dry.shared is not None and dry.shared["ended"]
        assert sorted(f["path"] for f in dry.shared["removed"]) == sorted(map(str, paths))
        assert all(path.is_file() for path in paths)
        (job,) = term.orphans.collect(dry_run=False).jobs
        assert job.error is None and len(job.shared["removed"]) == 2  # type: ignore[index]
        assert not any(path.exists() for path in paths)
        gate.set()
        assert service.replica.cleanup.wait_idle(60)
