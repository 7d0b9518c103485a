"""`sparkpoint demo`."""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from sparkpoint.ops.cli.hdfs import hdfs_dir_option
from sparkpoint.ops.demo.run import RETAINED, Demo, DemoOptions
from sparkpoint.ops.devcluster.hdfs import HdfsLaunchError
from sparkpoint.ops.devcluster.hdfs_checkpoints import hdfs_checkpoints
from sparkpoint.ops.devcluster.jvm import JvmArtifactsError


def _view(demo: Demo) -> Group:
    p = demo.progress
    pipeline = Table(title="pipeline: clicks per user (Spark local mode)", show_header=True)
    for column in ("epoch", "records", "records/s", "last checkpoint", "restored from"):
        pipeline.add_column(column)
    pipeline.add_row(str(p.epoch), f"{p.records:,}", f"{p.records_per_s:,.0f}",
                     str(p.last_completed or "-"), str(p.restored_from or "-"))  # fmt: skip
    coordinators = Table(title="coordinators (Ctrl-C stops everything)")
    for column in ("replica", "pid", "role", "address"):
        coordinators.add_column(column)
    leader = demo.leader[0] if demo.leader else None
    queued = demo.contenders()
    for replica in demo.replicas:
        role = ("stopped" if replica.stopped else "killed") if not replica.alive() else (
            f"leader (term {demo.leader[1]})" if demo.leader and replica.name == leader
            else "follower" if replica.name in queued else "starting"
        )  # fmt: skip
        pid = str(replica.proc.pid) if replica.proc else "-"
        coordinators.add_row(replica.name, pid, role, replica.host_port)
    return Group(pipeline, coordinators)


def _log_event(console: Console, event: dict[str, Any]) -> None:
    kind = event["event"]
    if kind == "leader":
        extra = f" after {event['handover_s']} s" if "handover_s" in event else ""
        console.log(f"[bold green]{event['leader']}[/] leads with term {event['term']}{extra}")
    elif kind == "killed":
        console.log(f"[bold red]{event['signal']}[/] sent to {event['coordinator']}")
    elif kind == "checkpoint":
        console.log(f"checkpoint {event['checkpoint_id']} completed (epoch {event['epoch']})")
    elif kind == "addresses":
        _log_addresses(console, event)
    elif kind == "zookeeper":
        console.log(
            f"ZooKeeper serving at {event['connect_string']}; REST authentication is "
            "off for this local demo (docs/security.md)"
        )
    elif kind == "pipeline":
        console.log(f"pipeline started (pid {event['pid']}); Spark takes a few seconds")
    elif kind == "standby":
        console.log(f"standby driver started (pid {event['pid']}); it waits, warm")
    elif kind == "driver-killed":
        console.log(f"[bold red]SIGKILL[/] sent to the active driver (pid {event['pid']})")
    elif kind == "driver-takeover":
        console.log(
            f"[bold green]standby driver (pid {event['pid']})[/] took over in "
            f"{event['takeover_s']} s, restored checkpoint {event['restored_from']}"
        )
    elif kind in ("connectors", "draining"):
        console.log(_connector_event(event))
    elif kind == "pipeline-exited":
        console.log(f"[bold red]the pipeline exited with {event['code']}[/]; see the logs")


@click.command("demo")
@click.option("--kill-leader-every", type=click.FloatRange(min=2.0), metavar="SECONDS",
              help="Kill the leading coordinator every SECONDS to show failover.")  # fmt: skip
@click.option("--signal", "signal_name", type=click.Choice(["KILL", "TERM", "STOP"]),
              default="KILL", show_default=True,
              help="How the leader is killed (STOP pauses it past the takeover).")  # fmt: skip
@click.option(
    "--standby-driver",
    is_flag=True,
    help="Run a warm standby driver beside the pipeline's driver: if the driver "
    "dies, the standby takes the job over in seconds (a new one follows).",
)
@click.option("--kill-driver-every", type=click.FloatRange(min=5.0), metavar="SECONDS",
              help="With --standby-driver: kill -9 the active driver every SECONDS (once "
                   "the standby waits, warm) to show the takeover.")  # fmt: skip
@click.option("--checkpoint-interval", type=click.FloatRange(min=0.5), default=3.0,
              show_default=True, help="Seconds between checkpoints.")  # fmt: skip
@click.option("--parallelism", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Parallelism of the keyed operator (Spark partitions).")  # fmt: skip
@click.option("--session-timeout", type=click.FloatRange(1.0, 600.0), default=10.0,
              show_default=True, help="Coordinators' ZooKeeper session timeout (s).")  # fmt: skip
@click.option("--takeover-timeout", type=click.FloatRange(min=0.0), default=1.5,
              show_default=True,
              help="A follower takes over when the leader's lease went unrenewed this long "
                   "(s); 0 waits for its session to expire instead.")  # fmt: skip
@click.option("--duration", type=click.FloatRange(min=1.0), metavar="SECONDS",
              help="Stop by itself after SECONDS (default: run until Ctrl-C).")  # fmt: skip
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Where output, checkpoints and logs go (default: a new temporary "
                   "directory).")  # fmt: skip
@click.option("--source", type=click.Choice(["generator", "rabbitmq", "kafka"]),
              default="generator", show_default=True,
              help="generator: click events; rabbitmq: a local broker and a publisher "
                   "(needs --sink postgres); kafka: a local Kafka and a producer (needs "
                   "--sink kafka).")  # fmt: skip
@click.option("--sink", type=click.Choice(["files", "postgres", "kafka"]), default="files",
              show_default=True,
              help="files: transactional files; postgres: a local PostgreSQL, two-phase "
                   "commit; kafka: an output topic, transactions at checkpoint completion. "
                   "Both with an exactly-once check at the end (exit 1 if it fails).")  # fmt: skip
@click.option("--storage", type=click.Choice(["local", "hdfs"]), default="local",
              show_default=True,
              help="Where checkpoints go: the local disk, or a real HDFS (the one of "
                   "`sparkpoint hdfs start --dir HDFS_DIR`, else one started for the "
                   "demo).")  # fmt: skip
@hdfs_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
def demo(
    kill_leader_every: float | None,
    signal_name: str,
    standby_driver: bool,
    kill_driver_every: float | None,
    checkpoint_interval: float,
    parallelism: int,
    session_timeout: float,
    takeover_timeout: float,
    duration: float | None,
    directory: Path | None,
    source: str,
    sink: str,
    storage: str,
    hdfs_dir: Path,
    as_json: bool,
) -> None:
    """Run ZooKeeper, two coordinators and a stateful PySpark pipeline on this machine.

    The pipeline computes per-user running totals and sessions over generated click
    events, checkpoints every few seconds through the coordinators, and writes its
    output exactly once. With --kill-leader-every the leading coordinator is killed on
    schedule: the other takes over by lease, the pipeline keeps running, and checkpoint
    ids keep rising. Ctrl-C stops everything cleanly and prints where the output and the
    checkpoints are.
    """
    _check_connectors(source, sink)
    if kill_driver_every is not None and not standby_driver:
        raise click.UsageError(
            "--kill-driver-every needs --standby-driver (else nothing takes "
            "over: see `drill chaos` for a driver restarted cold)"
        )
    directory = (directory or Path(tempfile.mkdtemp(prefix="sparkpoint-demo-"))).resolve()
    console = Console()

    def emit(event: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(event), nl=True)
        else:
            _log_event(console, event)

    try:
        hdfs = hdfs_checkpoints(hdfs_dir, directory / "hdfs") if storage == "hdfs" else None
    except (HdfsLaunchError, JvmArtifactsError) as exc:
        raise click.ClickException(str(exc)) from exc
    options = DemoOptions(
        directory=directory,
        session_timeout_s=session_timeout,
        takeover_timeout_s=takeover_timeout,
        checkpoint_interval_s=checkpoint_interval,
        parallelism=parallelism,
        kill_leader_every_s=kill_leader_every,
        kill_signal=signal.Signals[f"SIG{signal_name}"],
        standby_driver=standby_driver,
        kill_driver_every_s=kill_driver_every,
        duration_s=duration,
        source=source,
        sink=sink,
        checkpoint_root=hdfs.root if hdfs else None,
    )
    runner = Demo(options, emit)
    try:
        if as_json:
            runner.run()
        else:
            with Live(console=console, refresh_per_second=4, transient=True) as live:
                runner.run(lambda d: live.update(_view(d)))
    except KeyboardInterrupt:
        pass
    finally:
        if not as_json:
            console.log("stopping: pipeline first (at an epoch boundary), then coordinators")
        runner.stop()
    summary = runner.summary()
    if hdfs is not None:
        summary["left_on_hdfs"] = hdfs.left_on_hdfs(runner.job_id)
        hdfs.close()
    verification = summary.get("verification")
    failed = verification is not None and not verification.get("ok")
    if as_json:
        click.echo(json.dumps({"event": "summary", **summary}))
        if failed:
            raise SystemExit(1)
        return
    console.print(_view(runner))
    takeovers = summary.get("driver_takeovers")
    driver_part = f", {len(takeovers)} driver takeovers" if takeovers is not None else ""
    console.print(
        f"{summary['epochs']} epochs, {summary['records']:,} records, last checkpoint "
        f"{summary['last_completed_checkpoint']}, {len(summary['failovers'])} failovers"
        f"{driver_part}.\n"
        f"output (committed files part-*): {summary['output']}\n"
        f"checkpoints: {summary['checkpoints']}\nlogs: {summary['logs']}\n"
        f"per-key state of the newest checkpoint: {summary['state_read']}",
        soft_wrap=True,  # whole paths, to copy, even when the output is not a terminal
    )
    if hdfs is not None:
        left = summary["left_on_hdfs"]
        console.print(
            f"left on HDFS: complete {left['complete']} (the demo retains {RETAINED}), "
            f"incomplete {left['incomplete']} (in flight at the stop, or not yet collected)"
        )
    _print_verification(console, verification)
    if failed:
        raise SystemExit(1)


def _log_addresses(console: Console, event: dict[str, Any]) -> None:
    for c in event["coordinators"]:
        console.log(f"{c['name']} (pid {c['pid']}): web UI {c['ui']}, REST {c['rest']}")
    console.log(f"ZooKeeper {event['zookeeper']}, cluster id {event['cluster_id']}; the CLI:")
    console.print(event["export"], soft_wrap=True, highlight=False)


def _check_connectors(source: str, sink: str) -> None:
    pairs = {"rabbitmq": "postgres", "kafka": "kafka"}
    if pairs.get(source) != (sink if sink in pairs.values() else None):
        raise click.UsageError(
            f"--source {source} --sink {sink}: the connectors go together, use "
            "--source rabbitmq --sink postgres, --source kafka --sink kafka (or neither)"
        )


def _connector_event(event: dict[str, Any]) -> str:
    if event["event"] == "connectors" and "kafka" in event:
        return f"Kafka at {event['kafka']}"
    if event["event"] == "connectors":
        return f"RabbitMQ at {event['rabbitmq']}, PostgreSQL at {event['postgres']}"
    return f"publisher stopped after {event['published']:,} messages; draining"


def _print_verification(console: Console, verification: dict[str, Any] | None) -> None:
    if verification is not None:
        console.print(
            f"{verification.get('summary', 'no verification (the demo did not get that far)')}"
            f"; poison messages {verification.get('poisoned')}, in the dead-letter queue "
            f"{verification.get('dead_lettered')}"
        )
