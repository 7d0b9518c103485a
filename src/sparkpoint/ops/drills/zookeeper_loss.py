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

from sparkpoint.ops.devcluster.zookeeper import server_mode
from sparkpoint.ops.drills.cluster import DrillError, LocalCluster, Target
from sparkpoint.ops.drills.invariants import (
    Invariant,
    check_ids_rising,
    check_no_id_reused,
    check_single_leader,
)
from sparkpoint.ops.drills.kill_leader import steady
from sparkpoint.ops.drills.observer import ClusterObserver, Observation
from sparkpoint.ops.drills.report import DrillReport, IterationResult
from sparkpoint.ops.drills.verification import metadata_written_after

DEADLINE_S = 90.0
# A leader finishing a checkpoint at the very moment the quorum goes may still rename
# its _metadata (its store write then fails): only writes after this margin count.
WRITE_MARGIN_S = 1.0


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
    report = DrillReport("zookeeper-loss", {**config, "outage_s": outage_s})
    before = steady(observer, 0, DEADLINE_S)
    first, one = _one_server_lost(target, observer, before)
    second = next(s.server_id for s in target.zk.servers if s.server_id != first)
    two, lost_at, ids_before = _quorum_lost(target, observer, first, second, outage_s)
    three = _quorum_back(target, observer, (first, second), lost_at, ids_before, two)
    three.old_epoch = before.leader_epoch
    for result in (one, two, three):
        report.iterations.append(result)
        if progress is not None:
            progress(result)
    return report


def _one_server_lost(
    target: LocalCluster, observer: ClusterObserver, before: Observation
) -> tuple[int, IterationResult]:
    """Stop the server leading the ensemble (the harder case); checkpoints must go on."""
    zk = target.zk
    leading = [s.server_id for s in zk.servers if server_mode(zk.host, s.client_port) == "leader"]
    first = leading[0] if leading else 3
    start = len(before.samples)
    t0 = observer.elapsed()
    zk.stop_server(first)
    found = observer.wait_for(
        lambda o: _completion_after(o, len(before.completions) + 1), DEADLINE_S
    )
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
    return first, one


def _quorum_lost(
    target: LocalCluster, observer: ClusterObserver, first: int, second: int, outage_s: float
) -> tuple[IterationResult, float, list[int]]:
    """Stop a second server and hold the outage; nobody may act or write meanwhile."""
    ids_before = [cid for cid, _ in observer.snapshot().completions]
    lost_wall = time.time()
    lost_at = observer.elapsed()
    target.zk.stop_server(second)
    threading.Event().wait(outage_s)  # the outage is the fault under test
    during = observer.snapshot()
    # A suspended leader stops acting at once (docs/ha.md); the margin covers the moment
    # the servers take to drop their clients and one sampling round.
    quiet = [s for s in during.samples if s.at_s >= lost_at + WRITE_MARGIN_S]
    acting = [round(s.at_s - lost_at, 2) for s in quiet if s.acting]
    written = metadata_written_after(target.checkpoint_dir, lost_wall + WRITE_MARGIN_S)
    two = IterationResult(2, f"quorum lost (servers {first}, {second}) for {outage_s:g} s")
    two.invariants = [
        Invariant("no_leader_acts", not acting,
                  f"acting leader at {acting[:5]} s after the loss" if acting
                  else f"{len(quiet)} samples, none acting"),
        Invariant("nothing_written", not written,
                  f"_metadata written: {written[:5]}" if written else "no _metadata written"),
    ]  # fmt: skip
    return two, lost_at, ids_before


def _quorum_back(
    target: LocalCluster,
    observer: ClusterObserver,
    servers: tuple[int, int],
    lost_at: float,
    ids_before: list[int],
    two: IterationResult,
) -> IterationResult:
    """Restart both servers: one leader, checkpoints resume, no id reused."""
    back_at = observer.elapsed()
    for server in reversed(servers):
        target.zk.start_server(server)
    target.zk.wait_serving(timeout=DEADLINE_S)
    found = observer.wait_for(
        lambda o: o if any(at >= back_at for _, at in o.completions)
        and o.leader_epoch is not None else None, DEADLINE_S)  # fmt: skip
    obs = found if isinstance(found, Observation) else observer.snapshot()
    # Nothing can be seen while ZooKeeper is down; what matters is that no pointer shows
    # up dated inside the outage (by when the observer's read saw it).
    completed_during = [cid for cid, at in obs.completions if lost_at + 1 <= at < back_at]
    two.invariants.append(Invariant(
        "nothing_completed", not completed_during,
        f"completed while the quorum was lost: {completed_during}" if completed_during
        else "no completion seen while the quorum was lost"))  # fmt: skip
    leader_at = next((s.at_s for s in obs.samples if s.at_s >= back_at and s.epoch is not None),
                     None)  # fmt: skip
    new = [(cid, at) for cid, at in obs.completions if at >= back_at]
    three = IterationResult(3, "quorum back",
                            time_to_leader_s=None if leader_at is None else leader_at - back_at,
                            time_to_checkpoint_s=(new[0][1] - back_at) if new else None,
                            new_epoch=obs.leader_epoch, new_leader=obs.leader_instance)  # fmt: skip
    threading.Event().wait(1.0)  # a second of samples with the quorum back, for the check
    obs = observer.snapshot()
    three.invariants = [
        check_single_leader([s for s in obs.samples if s.at_s >= back_at]),
        Invariant("checkpoints_resume", bool(new),
                  f"first after {new[0][1] - back_at:.2f} s" if new else "none resumed"),
        check_no_id_reused(ids_before, [cid for cid, _ in new]),
        check_ids_rising([cid for cid, _ in obs.completions]),
    ]  # fmt: skip
    return three
