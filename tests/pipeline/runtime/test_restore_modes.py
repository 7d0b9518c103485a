"""Restore modes (docs/recovery.md, "Restore modes") on the on-disk backend, whose
checkpoints are incremental: a job started from another job's checkpoint owns none of its
files (no-claim), so the other job's collector can never delete a file under it; claiming
one is refused, naming both jobs; a job's own checkpoint stays incremental when claimed.
Real Spark, real coordinators (the service on a real ZooKeeper), real files; each test
looks at the checkpoint directories and their `_metadata` afterwards."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.checkpoint import CompletedCheckpoint, IncrementalKeyedStateHandle
from sparkpoint.client import ClientError
from sparkpoint.examples.clicks import expected_state
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.pipeline import EmbeddedChannel, Pipeline, PipelineDriver
from sparkpoint.pipeline.channels.protocol import CheckpointChannel
from sparkpoint.pipeline.channels.remote import RemoteChannel
from sparkpoint.pipeline.state.snapshots import keyed_entries
from sparkpoint.recovery import plan_restore
from sparkpoint.runs.errors import InvalidRequestError
from sparkpoint.service import Service
from sparkpoint.statefiles.keys import decode_key
from sparkpoint.storage import CheckpointStorage, load_metadata
from sparkpoint.storage.shared_files import shared_directory, shared_references
from tests.pipeline import support
from tests.pipeline.support import MANUAL
from tests.service.support import start_in_process
from tests.support.waiting import wait_until

SOURCE, COPY = "source", "copy"


def pipeline(job_id: str, work: Path, parallelism: int = 2) -> Pipeline:
    return support.pipeline(job_id, work / f"out-{job_id}", parallelism).with_state_backend(
        "rocksdb"
    )


def checkpoint(driver: PipelineDriver) -> int:
    """Trigger a checkpoint, run the epoch that takes it, and wait until it completes."""
    cid = driver.channel.trigger_checkpoint()
    driver.run(max_epochs=1)
    assert cid in driver.status.acknowledged, driver.status

    def completed() -> bool:
        driver.poll()
        return cid in driver.status.completed

    wait_until(completed, timeout=60, message=f"checkpoint {cid} completes")
    return cid


def metadata(storage: CheckpointStorage, job_id: str, cid: int) -> CompletedCheckpoint:
    return load_metadata(storage.checkpoint_directory(job_id, cid)).checkpoint


def shared_files(checkpoint: CompletedCheckpoint) -> set[Path]:
    return {Path(p) for p in shared_references([checkpoint])}


def handles(checkpoint: CompletedCheckpoint) -> list[IncrementalKeyedStateHandle]:
    found = [s.keyed[0] for s in checkpoint.operator_states["process"].subtask_states.values()]
    assert all(isinstance(h, IncrementalKeyedStateHandle) for h in found), found
    return found  # type: ignore[return-value]


def assert_whole_and_own(storage: CheckpointStorage, job_id: str, cid: int) -> set[Path]:
    """Every shared file checkpoint ``cid`` of ``job_id`` references exists, under the
    job's own ``shared/``; every other file of it too. Returns its shared files."""
    own = Path(shared_directory(storage.checkpoint_dir, job_id))
    files = shared_files(metadata(storage, job_id, cid))
    assert files, "an incremental checkpoint references shared files"
    missing = sorted(str(f) for f in files if not f.is_file())
    assert not missing, f"checkpoint {cid} of {job_id} lost shared files: {missing}"
    foreign = sorted(str(f) for f in files if not f.is_relative_to(own))
    assert not foreign, f"checkpoint {cid} of {job_id} references files not its own: {foreign}"
    checks = storage.verify(storage.read_metadata(storage.checkpoint_directory(job_id, cid)))
    assert checks and all(c.ok for c in checks), checks
    return files


def keyed_state(storage: CheckpointStorage, p: Pipeline, cid: int, scratch: Path) -> dict:
    """Each user's keyed state in checkpoint ``cid`` of ``p``'s job, read as a restore
    reads it (the store's shared and private files)."""
    graph = p.job_graph()
    plan = plan_restore(metadata(storage, graph.job_id, cid), graph)
    [process] = [op for op in graph.operators if op.uid == "process"]
    state: dict[str, Any] = {}
    for subtask in plan.operators["process"].subtasks:
        for _, key, value in keyed_entries(subtask, process.max_parallelism, scratch):
            state[str(decode_key(key))] = pickle.loads(value)
    return state


def offline_state() -> dict[str, Any]:
    state: dict[str, Any] = {}
    for (user, name), value in expected_state(support.source().all_records()).items():
        state.setdefault(user, {})[name] = value
    return state


# -- through the service: another job's collector -------------------------------------


@pytest.fixture
def service(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[Service]:
    """A leading coordinator replica whose collector deletes an unreferenced shared file
    half a minute after it first saw it so (the checkpoint timeout, which may not exceed
    that, leaves a loaded machine's first epoch time), and keeps one checkpoint per job."""
    started = start_in_process(
        tmp_path,
        zk_server.connect_string,
        cluster_id,
        {
            "state.checkpoints.num-retained": "1",
            "state.checkpoints.orphan-cleanup.grace-period": "30 s",
            "execution.checkpointing.timeout": "30 s",
            "state.checkpoints.orphan-cleanup.interval": "100 ms",
        },
    )
    yield started
    started.stop()


@pytest.mark.slow
def test_a_job_restored_from_another_jobs_checkpoint_loses_no_file_to_its_collector(
    spark: Any, tmp_path: Path, service: Service, observer: Any
) -> None:
    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    opened: list[PipelineDriver] = []

    def driver(p: Pipeline, **restore: Any) -> PipelineDriver:
        channel = RemoteChannel([service.address], checkpoint_config={"interval_ms": MANUAL})
        opened.append(PipelineDriver(p, spark, channel, **restore))
        return opened[-1]

    def done(d: PipelineDriver) -> None:
        opened.remove(d)
        d.close()

    try:
        # Job A completes a checkpoint.
        a = driver(pipeline(SOURCE, tmp_path))
        assert a.start() is None
        a1 = checkpoint(a)
        a1_files = shared_files(metadata(storage, SOURCE, a1))
        a1_dir = storage.checkpoint_directory(SOURCE, a1)

        # Job B cannot claim it: the service says so, naming both jobs.
        claiming = driver(pipeline(COPY, tmp_path), restore_from=a1_dir, restore_mode="claim")
        with pytest.raises(ClientError, match=f"job '{SOURCE}'.*job '{COPY}'.*no-claim"):
            claiming.start()
        done(claiming)

        # Job B starts from it at the same parallelism (no-claim, the default) and
        # completes a checkpoint of its own.
        b = driver(pipeline(COPY, tmp_path), restore_from=a1_dir)
        restored = b.start()
        assert restored is not None and restored.checkpoint_id == a1 and not restored.claimed
        b1 = checkpoint(b)
        done(b)

        # Job A rescales (2 → 3) and completes another checkpoint: its first one is
        # subsumed, and its collector deletes every shared file of it past the grace period.
        done(a)
        a = driver(pipeline(SOURCE, tmp_path, 3))
        assert a.start() is not None
        a.run(max_epochs=1)
        a2 = checkpoint(a)
        assert not shared_files(metadata(storage, SOURCE, a2)) & a1_files  # new stores
        wait_until(
            lambda: not any(f.exists() for f in a1_files),
            timeout=120,  # the grace period and then some
            message=f"job {SOURCE}'s collector deleted the shared files of checkpoint {a1}",
        )
        done(a)

        # B's retained checkpoint is whole: every file it references is there, in B's own
        # shared/ — its first checkpoint after the restore was a full one.
        assert support.retained(observer, COPY) == [b1]
        assert_whole_and_own(storage, COPY, b1)
        assert not any(h.reused for h in handles(metadata(storage, COPY, b1)))

        # And it restores: B's next run goes on from it to the end of the input, and its
        # last checkpoint holds the state computed offline from the whole input.
        b = driver(pipeline(COPY, tmp_path))
        restored = b.start()
        assert restored is not None and restored.checkpoint_id == b1 and restored.claimed
        b.run()
        last = b.finish()
        done(b)
        assert_whole_and_own(storage, COPY, last)
        assert keyed_state(storage, pipeline(COPY, tmp_path), last, tmp_path) == offline_state()
    finally:
        for d in opened:
            d.close()


# -- in one process: the refusals, and a job's own checkpoints ------------------------


def embedded(directory: Path) -> CheckpointChannel:
    return EmbeddedChannel(str(directory), interval_ms=MANUAL, max_retained=10)


def test_claiming_a_checkpoint_that_is_not_the_jobs_own_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    a = PipelineDriver(pipeline(SOURCE, tmp_path), spark, embedded(ckpt))
    a.start()
    a.run(max_epochs=1)
    a1_dir = str(ckpt / SOURCE / f"chk-{checkpoint(a)}")
    a.close()

    # Another job.
    b = PipelineDriver(
        pipeline(COPY, tmp_path), spark, embedded(ckpt), restore_from=a1_dir, restore_mode="claim"
    )
    with pytest.raises(InvalidRequestError, match=f"job '{SOURCE}'.*job '{COPY}'.*no-claim"):
        b.start()
    b.close()
    # The same job in another checkpoint directory counts as another job.
    elsewhere = tmp_path / "elsewhere"
    same = PipelineDriver(
        pipeline(SOURCE, tmp_path),
        spark,
        embedded(elsewhere),
        restore_from=a1_dir,
        restore_mode="claim",
    )
    with pytest.raises(InvalidRequestError, match=f"{elsewhere / SOURCE}.*no-claim"):
        same.start()
    same.close()
    # Nothing was restored nor written for either.
    assert not (ckpt / COPY).exists() or not list((ckpt / COPY).glob("chk-*"))
    assert not list((elsewhere / SOURCE).glob("chk-*"))
    # A mode that does not exist is refused before anything runs.
    with pytest.raises(ValueError, match="restore mode 'steal' is unknown"):
        PipelineDriver(pipeline(COPY, tmp_path), spark, embedded(ckpt), restore_mode="steal")


def test_a_savepoint_is_full_and_never_claimed(spark: Any, tmp_path: Path) -> None:
    savepoint = support.savepoint_after(spark, pipeline(SOURCE, tmp_path), tmp_path, 1)
    state = load_metadata(savepoint).checkpoint.operator_states["process"]
    keyed = [h for s in state.subtask_states.values() for h in s.keyed]
    # Self-contained: key-group streams in its own directory, nothing in any shared/.
    assert keyed and not any(isinstance(h, IncrementalKeyedStateHandle) for h in keyed)
    claiming = PipelineDriver(
        pipeline(SOURCE, tmp_path),
        spark,
        embedded(tmp_path / "ckpt"),
        restore_from=savepoint,
        restore_mode="claim",
    )
    with pytest.raises(InvalidRequestError, match=r"is a savepoint of job 'source'.*no-claim"):
        claiming.start()
    claiming.close()
    # Either other way it restores, and the job's next checkpoint is its own.
    driver = PipelineDriver(
        pipeline(SOURCE, tmp_path), spark, embedded(tmp_path / "ckpt"), restore_from=savepoint
    )
    restored = driver.start()
    assert restored is not None and not restored.claimed
    cid = checkpoint(driver)
    driver.close()
    assert_whole_and_own(CheckpointStorage(str(tmp_path / "ckpt")), SOURCE, cid)


def test_a_restore_from_the_jobs_own_checkpoint_stays_incremental_when_claimed(
    spark: Any, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    storage = CheckpointStorage(str(ckpt))
    coordinator = EmbeddedChannel(str(ckpt), interval_ms=MANUAL, max_retained=10)

    def run_once(**restore: Any) -> tuple[bool, int]:
        """Start (restoring), one epoch taking a checkpoint; whether the start claimed the
        restored checkpoint, and the new one's id. (One epoch: each adds an SST file to a
        subtask's store, and a fourth one lets RocksDB compact them all into new files.)"""
        channel = coordinator.another_run()  # one counter: ids never reused
        driver = PipelineDriver(pipeline(SOURCE, tmp_path), spark, channel, **restore)
        restored = driver.start()
        cid = checkpoint(driver)
        driver.close()
        return restored is not None and restored.claimed, cid

    _, c1 = run_once()
    c1_files = assert_whole_and_own(storage, SOURCE, c1)

    def reuses_c1(cid: int) -> bool:
        files = assert_whole_and_own(storage, SOURCE, cid)
        reused = any(h.reused for h in handles(metadata(storage, SOURCE, cid)))
        assert reused == bool(files & c1_files), "reused names exactly the files it shares"
        return reused

    # A restart claims the job's latest checkpoint: the next one reuses its files.
    claimed, c2 = run_once()
    assert claimed and reuses_c1(c2)
    # So does an explicit claim of one of the job's own checkpoints.
    c1_dir = storage.checkpoint_directory(SOURCE, c1)
    claimed, c3 = run_once(restore_from=c1_dir, restore_mode="claim")
    assert claimed and reuses_c1(c3)
    # The default for a given checkpoint is no-claim, even the job's own: a full one.
    claimed, c4 = run_once(restore_from=c1_dir)
    assert not claimed and not reuses_c1(c4)
    coordinator.close()
