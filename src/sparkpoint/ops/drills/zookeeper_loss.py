"""``drill zookeeper-loss`` (local ensemble only): one ZooKeeper server of three, then
the quorum, then the quorum back.

1. One server stopped: the ensemble keeps its quorum, so leadership and checkpoints go
   on (a checkpoint completes after the stop).
2. A second server stopped — the quorum is lost for ``outage_s``: every leader's
   connection is suspended and it stops acting at once, so no replica reports itself as
   an acting leader once the grace has passed, no checkpoint completes and no ``_metadata``
   is written to checkpoint storage.
3. Both servers back: exactly one leader, checkpoints resume, and every id completed
   afterwards is above every id completed before (none reused).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from sparkpoint.ops.drills.cluster import DrillError, LocalCluster, Target
from sparkpoint.ops.drills.invariants import (
    Invariant,
    check_ids_rising,
    check_single_leader,
)
from sparkpoint.ops.drills.kill_leader import steady
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import DrillReport, IterationResult
from sparkpoint.ops.zookeeper import server_mode

DEADLINE_S = 90.0
# A leader finishing a checkpoint at the very moment the quorum goes may still rename
# its _metadata (its store write then fails): only writes after this margin count.
WRITE_MARGIN_S = 1.0


def metadata_written_after(directory: Path, wall_time: float) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.glob("*/chk-*/_metadata")
                  if p.stat().st_mtime > wall_time)  # fmt: skip


def _completion_after(o: Observation, count: int) -> Observation | None:
    return o if len(o.completions) > count and o.leader_epoch is not None else None


def run_zookeeper_loss(
    target: Target,
    observer: ClusterObserver,
    config: dict[str, object],
    progress: Callable[[IterationResult], None] | None = None,
    *,
    outage_s: float = 5.0,
) -> DrillReport:
    if not isinstance(target, LocalCluster):
        raise DrillError("zookeeper-loss needs the local ensemble (--local)")
    zk = target.zk
    report = DrillReport("zookeeper-loss", {**config, "outage_s": outage_s})
    pacing = threading.Event()

    def note(result: IterationResult) -> None:
        report.iterations.append(result)
        if progress is not None:
            progress(result)

    # 1. one server of three — the one leading the ensemble, the harder case.
    before = steady(observer, 0, DEADLINE_S)
    leading = [s.server_id for s in zk.servers if server_mode(zk.host, s.client_port) == "leader"]
    first = leading[0] if leading else 3
    start = len(before.samples)
    t0 = observer.snapshot().samples[-1].at_s
    zk.stop_server(first)
    found = observer.wait_for(lambda o: _completion_after(o, len(before.completions) + 1),
                              DEADLINE_S)  # fmt: skip
    obs = found if isinstance(found, Observation) else observer.snapshot()
    went_on = isinstance(found, Observation)
    later = [at for _, at in obs.completions[len(before.completions) :] if at >= t0]
    one = IterationResult(1, f"ZooKeeper server {first} of 3 stopped",
                          time_to_checkpoint_s=(later[0] - t0) if later else None,
                          old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
                          new_leader=obs.leader_instance)  # fmt: skip
    one.invariants = [
        check_single_leader(obs.samples[start:]),
        Invariant("checkpoints_go_on", went_on,
                  f"{len(later)} completed with 2 of 3 servers" if went_on
                  else "no checkpoint completed with 2 of 3 servers"),
    ]  # fmt: skip
    note(one)

    # 2. the quorum: a second server stopped.
    second = next(s.server_id for s in zk.servers if s.server_id != first)
    ids_before = [cid for cid, _ in observer.snapshot().completions]
    lost_wall = time.time()
    lost_at = observer.snapshot().samples[-1].at_s
    zk.stop_server(second)
    pacing.wait(outage_s)  # the outage is the fault under test
    during = observer.snapshot()
    # Give the leader its suspend grace (a third of the session) before demanding silence.
    grace = float(target.settings.session_timeout_s) / 3 + WRITE_MARGIN_S
    quiet = [s for s in during.samples if s.at_s >= lost_at + min(grace, outage_s)]
    acting = [round(s.at_s - lost_at, 2) for s in quiet if s.acting]
    written = metadata_written_after(target.checkpoints_dir, lost_wall + WRITE_MARGIN_S)
    two = IterationResult(2, f"quorum lost (servers {first}, {second}) for {outage_s:g} s")
    two.invariants = [
        Invariant("no_leader_acts", not acting,
                  f"acting leader at {acting[:5]} s after the loss" if acting
                  else f"{len(quiet)} samples, none acting"),
        Invariant("nothing_written", not written,
                  f"_metadata written: {written[:5]}" if written else "no _metadata written"),
    ]  # fmt: skip

    # 3. quorum back.
    back_at = observer.snapshot().samples[-1].at_s
    zk.start_server(second)
    zk.start_server(first)
    zk.wait_serving(timeout=DEADLINE_S)
    found = observer.wait_for(
        lambda o: o if any(at >= back_at for _, at in o.completions)
        and o.leader_epoch is not None else None, DEADLINE_S)  # fmt: skip
    obs = found if isinstance(found, Observation) else observer.snapshot()
    completed_during = [cid for cid, at in obs.completions if lost_at + 1 <= at < back_at]
    two.invariants.append(Invariant(
        "nothing_completed", not completed_during,
        f"completed while the quorum was lost: {completed_during}" if completed_during
        else "no completion seen while the quorum was lost"))  # fmt: skip
    note(two)
    leader_at = next((s.at_s for s in obs.samples if s.at_s >= back_at and s.epoch is not None),
                     None)  # fmt: skip
    resumed = [at for _, at in obs.completions if at >= back_at]
    new_ids = [cid for cid, at in obs.completions if at >= back_at]
    reused = [cid for cid in new_ids if cid <= max(ids_before, default=0)]
    three = IterationResult(3, "quorum back",
                            time_to_leader_s=None if leader_at is None else leader_at - back_at,
                            time_to_checkpoint_s=(resumed[0] - back_at) if resumed else None,
                            old_epoch=before.leader_epoch, new_epoch=obs.leader_epoch,
                            new_leader=obs.leader_instance)  # fmt: skip
    pacing.wait(1.0)  # a moment of samples with the quorum back, for the single-leader check
    obs = observer.snapshot()
    three.invariants = [
        check_single_leader([s for s in obs.samples if s.at_s >= back_at]),
        Invariant("checkpoints_resume", bool(resumed),
                  f"first after {resumed[0] - back_at:.2f} s" if resumed else "none resumed"),
        Invariant("no_id_reused", not reused,
                  f"reused {reused}" if reused else f"{len(new_ids)} new ids, all above "
                  f"{max(ids_before, default=0)}"),
        check_ids_rising([cid for cid, _ in obs.completions]),
    ]  # fmt: skip
    note(three)
    return report
