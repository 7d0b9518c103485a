"""`sparkpoint drill kill-leader | kill-driver | pause-leader | zookeeper-loss | chaos`:
thin commands over ``sparkpoint.ops.drills``. Exit status 0 when every invariant held, 1
when any was violated, 2 when the drill could not run (bad arguments, no Java, ZooKeeper
or the cluster did not start, the cluster never became steady)."""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from sparkpoint.ha import HAError
from sparkpoint.ops.cli.common import zookeeper_options
from sparkpoint.ops.cli.hdfs import hdfs_dir_option
from sparkpoint.ops.devcluster.zookeeper import ZooKeeperLaunchError
from sparkpoint.ops.drills.chaos import (
    CLICKS_FAULTS,
    FAULTS,
    PIPELINE_FAULTS,
    ChaosOptions,
    run_chaos,
)
from sparkpoint.ops.drills.cluster import DrillError
from sparkpoint.ops.drills.hdfs_faults import HDFS_FAULTS, HDFS_TOLERABLE_FAILURES
from sparkpoint.ops.drills.job_faults import SLOW_DELETION_S
from sparkpoint.ops.drills.kafka_broker import KAFKA_BROKER_RESTART
from sparkpoint.ops.drills.kill_driver import KillDriverOptions, run_kill_driver
from sparkpoint.ops.drills.kill_leader import KillLeaderOptions, run_kill_leader
from sparkpoint.ops.drills.pause_leader import run_pause_leader
from sparkpoint.ops.drills.replicas import ReplicaSettings
from sparkpoint.ops.drills.report import DrillReport, IterationResult
from sparkpoint.ops.drills.runner import TargetSpec, run_drill
from sparkpoint.ops.drills.shared_state_faults import SLOW_ACK
from sparkpoint.ops.drills.zookeeper_loss import run_zookeeper_loss
from sparkpoint.pipeline.state.backend import BACKEND_NAMES

F = Callable[..., Any]
_DEFAULTS = ReplicaSettings()

#: The drill ran and every invariant held / one was violated / it could not run.
EXIT_OK, EXIT_VIOLATED, EXIT_COULD_NOT_RUN = 0, 1, 2
#: Each finished iteration, while the drill runs (removed once the report is written).
PARTIAL = "iterations.partial.jsonl"


def target_options(func: F) -> F:
    func = zookeeper_options(func)
    options = [
        click.option("--local", is_flag=True,
                     help="Self-contained: a 3-server ZooKeeper ensemble, 3 coordinators and "
                          "the demo pipeline on this machine."),
        click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
                     help="--local: where data and logs go (default: a new temporary one)."),
        click.option("--workload", type=click.Choice(["pipeline", "kafka", "driver"]),
                     default="pipeline", show_default=True,
                     help="--local: the demo PySpark pipeline (checks exactly-once output), "
                          "the orders job from a Kafka topic to another on a local Kafka "
                          "(checks the output topic read_committed), or a light "
                          "acknowledging driver."),
        click.option("--kafka-nodes", type=click.Choice(["1", "3"]), default="1",
                     show_default=True,
                     help="--workload kafka: brokers of the local Kafka (with 1, a broker "
                          "restart is an outage of Kafka)."),
        click.option("--session-timeout", type=click.FloatRange(1.0, 600.0),
                     default=_DEFAULTS.session_timeout_s, show_default=True,
                     help="--local: replicas' session timeout (s; the product default)."),
        click.option("--takeover-timeout", type=click.FloatRange(0.3, 600.0),
                     default=_DEFAULTS.takeover_timeout_s, show_default=True,
                     help="Lease takeover timeout (s): --local sets it; for a deployment, "
                          "give its configured value (it sets the pause lengths)."),
        click.option("--checkpoint-interval", type=click.FloatRange(0.05, 3600.0),
                     default=None,
                     help="--local: the workload's checkpoint interval (s; default 0.5 for "
                          "the pipeline, 0.3 for the driver)."),
        click.option("--state-backend", type=click.Choice(BACKEND_NAMES), default=None,
                     help="--local: where the demo pipeline keeps keyed state (state.backend; "
                          "default: $SPARKPOINT_STATE_BACKEND, else memory). rocksdb: "
                          "incremental checkpoints; the drill also checks their shared files."),
        click.option("--num-retained", type=click.IntRange(1, 10_000),
                     default=_DEFAULTS.num_retained, show_default=True,
                     help="--local: completed checkpoints each job retains "
                          "(state.checkpoints.num-retained; the product default)."),
        click.option("--storage", type=click.Choice(["local", "hdfs"]), default="local",
                     show_default=True,
                     help="--local: where checkpoints go: the drill's directory, or a real "
                          "HDFS (the one of `sparkpoint hdfs start --dir HDFS_DIR`, else one "
                          "started for the drill). With hdfs, chaos adds datanode-kill and "
                          "namenode-restart."),
        hdfs_dir_option,
        click.option("--restart-command", metavar="CMD",
                     help="Deployment: shell command restarting a signalled replica "
                          "({instance_id}, {pid} filled in); default: its supervisor does."),
        click.option("--signal-command", metavar="CMD",
                     help="Deployment: shell command signalling a replica elsewhere "
                          "({instance_id}, {signal} filled in; default: local processes only)."),
        click.option("--job", "job_id", default=None,
                     help="Deployment: the drill's own job id (default drill-job)."),
        click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Write report.json, summary.txt and failover.png here."),
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def _spec(opts: dict[str, Any], *, zookeeper_proxies: bool = False, **settings_: Any) -> TargetSpec:
    if not opts["local"] and not (opts["quorum"] and opts["cluster_id"]):
        raise click.UsageError("give --local, or --zookeeper QUORUM and --cluster-id ID")
    if opts["takeover_timeout"] >= opts["session_timeout"]:
        raise click.BadParameter(
            f"{opts['takeover_timeout']:g} s must be below the session timeout "
            f"({opts['session_timeout']:g} s)", param_hint="--takeover-timeout")  # fmt: skip
    if opts["takeover_timeout"] < 3 * _DEFAULTS.renew_interval_s:
        raise click.BadParameter(
            f"{opts['takeover_timeout']:g} s is below 3 lease renewals "
            f"({3 * _DEFAULTS.renew_interval_s:g} s)", param_hint="--takeover-timeout")  # fmt: skip
    if opts["state_backend"] and not (opts["local"] and opts["workload"] == "pipeline"):
        raise click.BadParameter(
            "the state backend is the demo pipeline's: give it with --local and "
            "--workload pipeline (the Kafka workload's orders job keeps its state in memory)",
            param_hint="--state-backend")  # fmt: skip
    if opts["storage"] != "local" and not opts["local"]:
        raise click.BadParameter(
            "a deployment keeps checkpoints where it is configured to; --storage is for "
            "--local", param_hint="--storage")  # fmt: skip
    settings = ReplicaSettings(session_timeout_s=opts["session_timeout"],
                               takeover_timeout_s=opts["takeover_timeout"],
                               num_retained=opts["num_retained"],
                               **settings_)  # fmt: skip
    return TargetSpec(
        local=opts["local"], directory=opts["directory"],
        pipeline=opts["workload"] in ("pipeline", "kafka"), settings=settings,
        quorum=opts["quorum"], cluster_id=opts["cluster_id"], root=opts["root"],
        restart_command=opts["restart_command"], job_id=opts["job_id"],
        signal_command=opts["signal_command"], zookeeper_proxies=zookeeper_proxies,
        checkpoint_interval_ms=None if opts["checkpoint_interval"] is None
        else round(opts["checkpoint_interval"] * 1000),
        state_backend=opts["state_backend"],
        storage=opts["storage"], hdfs_dir=opts["hdfs_dir"],
        kafka_nodes=int(opts["kafka_nodes"]) if opts["workload"] == "kafka" else 0,
    )  # fmt: skip


def _execute(opts: dict[str, Any], body: Callable[..., DrillReport], **spec_options: Any) -> None:
    spec = _spec(opts, **spec_options)
    if spec.local and spec.directory is None:
        spec = dataclasses.replace(
            spec, directory=Path(tempfile.mkdtemp(prefix="sparkpoint-drill-"))
        )
    if spec.local:  # logs, checkpoints and ZooKeeper's data stay there afterwards
        click.echo(f"drill directory (logs, checkpoints, ZooKeeper data): {spec.directory}",
                   err=True)  # fmt: skip
    code = report_and_exit_code(opts, lambda p: run_drill(spec, lambda t, o, c: body(t, o, c, p)))
    if code:
        raise SystemExit(code)


def report_and_exit_code(
    opts: dict[str, Any], run: Callable[[Callable[[IterationResult], None]], DrillReport]
) -> int:
    """Run the drill (``run(progress)``), print and write its report; the exit status."""
    console = Console(stderr=opts["as_json"])
    # Drills break connections on purpose: kazoo's reconnect warnings are expected noise.
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    # The observer reads retained pointers while the leader subsumes them: a pointer
    # vanishing between listing and reading is expected with one retained checkpoint.
    logging.getLogger("sparkpoint.store.zookeeper").setLevel(logging.ERROR)

    partial = opts["report_dir"] / PARTIAL if opts["report_dir"] else None
    if partial is not None:
        partial.unlink(missing_ok=True)

    def progress(result: IterationResult) -> None:
        figures = ", ".join(
            f"{label} {value:.2f} s"
            for label, value in (("leader", result.time_to_leader_s),
                                 ("checkpoint", result.time_to_checkpoint_s))
            if value is not None
        )  # fmt: skip
        verdict = "[green]ok[/]" if result.ok else "[bold red]VIOLATED[/]"
        console.log(f"{result.iteration}: {result.action}: {figures or 'no failover'} {verdict}")
        if partial is not None:
            # A long run cut short still leaves every finished iteration behind.
            partial.parent.mkdir(parents=True, exist_ok=True)
            with partial.open("a") as f:
                f.write(json.dumps(result.to_dict()) + "\n")

    try:
        report = run(progress)
    except (DrillError, HAError, ZooKeeperLaunchError) as exc:
        click.echo(f"Error: the drill could not run: {exc}", err=True)
        return EXIT_COULD_NOT_RUN
    if opts["report_dir"]:
        paths = report.write(opts["report_dir"])
        if partial is not None:
            partial.unlink(missing_ok=True)
        console.log(f"report: {', '.join(str(p) for p in paths.values())}")
    if opts["as_json"]:
        click.echo(json.dumps(report.to_dict(), indent=1))
    else:
        console.print(report.table())
        for line in report.summary_lines():
            console.print(line)
    return EXIT_OK if report.ok else EXIT_VIOLATED


@click.group("drill")
def drill_group() -> None:
    """Failover drills against a deployment (--zookeeper, --cluster-id) or --local."""


@drill_group.command("kill-leader")
@click.option("--iterations", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--signal", "signal_name", type=click.Choice(["KILL", "TERM", "STOP"]),
              default="KILL", show_default=True,
              help="STOP freezes the leader for 3 x the takeover timeout, then CONT.")  # fmt: skip
@click.option("--interval", type=click.FloatRange(min=0.0), default=2.0, show_default=True,
              help="Seconds between iterations, once the cluster is steady again.")  # fmt: skip
@target_options
def kill_leader(iterations: int, signal_name: str, interval: float, **opts: Any) -> None:
    """Signal the leader ITERATIONS times; time each failover and check the invariants.

    Measures, from each signal, the time to a new leader (a higher term) and to
    the first checkpoint it completes; checks at most one acting leader at any moment,
    checkpoint ids strictly rising and never reused, no retained checkpoint lost, and with
    --local the demo pipeline's exactly-once output and, at the end, the job's shared
    state files (none referenced missing, none unreferenced left). The replica is then
    restarted.
    """
    options = KillLeaderOptions(iterations=iterations, signal=signal_name, interval_s=interval)
    _execute(opts, lambda t, o, c, p: run_kill_leader(t, o, options, c, p))


@drill_group.command("kill-driver")
@click.option("--iterations", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.0),
    default=2.0,
    show_default=True,
    help="Seconds between iterations, once a standby waits again.",
)
@click.option(
    "--driver-takeover-timeout",
    type=click.FloatRange(0.1, 3600.0),
    default=_DEFAULTS.driver_takeover_timeout_s,
    show_default=True,
    help="The replicas' driver takeover timeout (s; the product default): a "
    "silent driver whose process still answers probes waits this long.",
)
@click.option(
    "--cold",
    is_flag=True,
    help="No standby: start the killed driver again at once, as a supervisor would "
    "(the figure the standby is measured against).",
)
@target_options
def kill_driver(
    iterations: int, interval: float, driver_takeover_timeout: float, cold: bool, **opts: Any
) -> None:
    """Kill -9 the pipeline's active driver ITERATIONS times while a warm standby waits (--local).

    Measures, from each kill, the time until the leader grants the standby the job, until
    the standby has restored the latest checkpoint, and until it completes a checkpoint
    of its own; checks at most one acting leader, ids strictly rising, no retained
    checkpoint lost, driver runs completing checkpoints in turns, and the exactly-once
    output. A new standby is started before each iteration. With --cold there is none:
    the killed driver is started again at once, JVM and SparkSession first.
    """  # fmt: skip
    if not opts["local"]:
        raise click.UsageError("kill-driver starts the pipeline's drivers: it runs with --local")
    if opts["workload"] != "pipeline":
        raise click.UsageError("kill-driver kills the pipeline's driver: --workload pipeline")
    options = KillDriverOptions(iterations=iterations, interval_s=interval, cold=cold)
    _execute(opts, lambda t, o, c, p: run_kill_driver(t, o, options, c, p),
             driver_takeover_timeout_s=driver_takeover_timeout)  # fmt: skip


@drill_group.command("pause-leader")
@target_options
def pause_leader(**opts: Any) -> None:
    """The zombie: SIGSTOP the leader for 3 x the takeover timeout, then SIGCONT.

    A follower must take over meanwhile; the thawed leader must complete nothing, its
    first write must be fenced, and it must step down to follower.
    """
    _execute(opts, run_pause_leader)


@drill_group.command("zookeeper-loss")
@click.option("--outage", type=click.FloatRange(min=1.0), default=5.0, show_default=True,
              help="Seconds the quorum stays lost.")  # fmt: skip
@target_options
def zookeeper_loss(outage: float, **opts: Any) -> None:
    """One ZooKeeper server of three lost, then the quorum, then the quorum back (--local).

    One server down: leadership and checkpoints go on. Quorum lost: no replica acts, no
    checkpoint completes, nothing is written. Quorum back: exactly one leader,
    checkpoints resume, no id reused.
    """
    if not opts["local"]:
        raise click.UsageError("zookeeper-loss stops ZooKeeper servers: it runs with --local")
    _execute(opts, lambda t, o, c, p: run_zookeeper_loss(t, o, c, p, outage_s=outage))


@drill_group.command("chaos")
@click.option("--iterations", type=click.IntRange(min=1), default=10, show_default=True)
@click.option(
    "--seed",
    type=int,
    default=1,
    show_default=True,
    help="Picks the faults: the same seed gives the same faults in the same order.",
)
@click.option(
    "--fault",
    "faults",
    type=click.Choice((*FAULTS, *HDFS_FAULTS, KAFKA_BROKER_RESTART)),
    multiple=True,
    help="Pick only among these (repeatable; default: every fault the workload and storage "
    "allow; datanode-kill and namenode-restart need --storage hdfs, kafka-broker-restart "
    "--workload kafka).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.0),
    default=1.0,
    show_default=True,
    help="Seconds between iterations, once the cluster is steady again.",
)
@click.option(
    "--orphan-grace",
    type=click.FloatRange(min=0.5),
    default=30.0,
    show_default=True,
    help="The replicas' orphan-collector grace period (s; scanned every sixth of "
    "it): a directory neither retained nor pending and older than the grace, "
    "a scan and a margin counts as leaked. Also their checkpoint timeout "
    "(execution.checkpointing.timeout), which may not exceed it.",
)
@click.option(
    "--checkpoint-timeout",
    type=click.FloatRange(min=0.5),
    default=None,
    help="The jobs' checkpoint timeout (s; execution.checkpointing.timeout of the "
    "replicas; default: the product's). Where a timeout above the orphan grace period is "
    "refused, give at most --orphan-grace; with slow-ack drawn the replicas then tolerate "
    "5 failed checkpoints (one held past the timeout expires).",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1.0),
    default=None,
    help="Seconds after which no further fault is injected; the run then finishes "
    "(exactly-once check, report) with the iterations done.",
)
@target_options
def chaos(
    iterations: int,
    seed: int,
    faults: tuple[str, ...],
    interval: float,
    orphan_grace: float,
    checkpoint_timeout: float | None,
    time_limit: float | None,
    **opts: Any,
) -> None:
    """ITERATIONS faults, each picked at random (seeded) from: kill -9, SIGTERM or SIGSTOP
    of the leader, the leader cut off from ZooKeeper, its ZooKeeper replies dropped, one
    ZooKeeper server killed, the pipeline driver killed, the job stopped with a savepoint
    and registered again from it, the driver restarted at another parallelism with a
    checkpoint in flight, the leader deposed with slow deletions queued, an intermediate
    savepoint then at once the driver or the leader killed, a second job started from
    the job's checkpoint while the job goes on past the grace period, and the driver's
    acknowledgement held back beyond the grace period (--local); with --storage hdfs
    also a DataNode killed (replication >= 2) and started again, and the NameNode killed
    and started again (the replicas then tolerate 5 consecutive failed checkpoints:
    those in flight while the NameNode is away); with --workload kafka also a Kafka
    broker restarted.

    After each: the kill-leader checks, completions as the drivers heard them (each id
    once, one pointer), the latest retained checkpoint loaded, verified and planned for
    restore, no checkpoint directory older than --orphan-grace unless retained or
    pending, and no output line committed twice; at the end, the pipeline's exactly-once
    output (with --workload kafka: the output topic read read_committed) and the shared
    state files of every job (as `checkpoints shared-check`). The report names each
    iteration's fault.
    """  # fmt: skip
    if not opts["local"]:
        raise click.UsageError(
            "chaos routes the replicas' ZooKeeper traffic through fault "
            "proxies and kills ZooKeeper servers: it runs with --local"
        )
    on_hdfs = opts["storage"] == "hdfs"
    if set(faults) & set(HDFS_FAULTS) and not on_hdfs:
        raise click.UsageError(f"{', '.join(HDFS_FAULTS)} need --storage hdfs")
    on_kafka = opts["workload"] == "kafka"
    if KAFKA_BROKER_RESTART in faults and not on_kafka:
        raise click.UsageError(f"{KAFKA_BROKER_RESTART} needs --workload kafka")
    faults = faults or (*FAULTS, *(HDFS_FAULTS if on_hdfs else ()),
                        *((KAFKA_BROKER_RESTART,) if on_kafka else ()))  # fmt: skip
    unfit = (PIPELINE_FAULTS if opts["workload"] == "driver"
             else CLICKS_FAULTS if on_kafka else ())  # fmt: skip
    if set(faults) & set(unfit):
        faults = tuple(f for f in faults if f not in unfit)
        if not faults:
            raise click.UsageError(f"{', '.join(unfit)} need --workload pipeline")
    options = ChaosOptions(
        iterations=iterations,
        seed=seed,
        faults=faults,
        interval_s=interval,
        orphan_grace_s=orphan_grace,
        time_limit_s=time_limit,
    )
    _execute(
        opts,
        lambda t, o, c, p: run_chaos(t, o, options, c, p),
        zookeeper_proxies=True,
        orphan_grace_s=orphan_grace,
        orphan_scan_interval_s=orphan_grace / 6,
        checkpoint_timeout_s=checkpoint_timeout,
        cleanup_delay_s=SLOW_DELETION_S if "slow-deletions" in options.faults else 0.0,
        # A checkpoint declined while the NameNode restarts must not fail the job, nor
        # one whose acknowledgement slow-ack holds past a timeout no longer than the grace.
        **({"tolerable_failed_checkpoints": HDFS_TOLERABLE_FAILURES}
           if set(options.faults) & set(HDFS_FAULTS)
           or (SLOW_ACK in options.faults and checkpoint_timeout is not None) else {}),
    )  # fmt: skip
