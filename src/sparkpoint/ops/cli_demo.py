"""`sparkpoint demo`."""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

from sparkpoint.ops.demo import Demo, DemoOptions


def _table(demo: Demo) -> Table:
    table = Table(title="sparkpoint demo — leader election with fencing (Ctrl-C stops)")
    for column in ("contender", "pid", "state", "epoch", "terms won", "ids issued", "last id"):
        table.add_column(column)
    for contender in demo.contenders:
        status = contender.status()
        ids = contender.issued()
        table.add_row(
            contender.name,
            str(status.get("pid", "-")),
            status.get("state", "starting") if contender.alive() else "killed",
            str(status.get("epoch") or "-"),
            str(status.get("terms_won", 0)),
            str(len(ids)),
            str(ids[-1]) if ids else "-",
        )
    return table


@click.command("demo")
@click.option("--kill-leader-every", type=click.FloatRange(min=1.0), metavar="SECONDS",
              help="Kill the current leader every SECONDS to show failover.")  # fmt: skip
@click.option("--signal", "signal_name", type=click.Choice(["KILL", "TERM", "STOP"]),
              default="KILL", show_default=True, help="How the leader is killed.")  # fmt: skip
@click.option("--session-timeout", type=click.FloatRange(1.0, 600.0), default=10.0,
              show_default=True, help="Contenders' ZooKeeper session timeout (s).")  # fmt: skip
@click.option("--takeover-timeout", type=click.FloatRange(min=0.0), default=1.5,
              show_default=True,
              help="Followers take over a leader whose lease went unrenewed this long (s); "
                   "0 waits for its session to expire instead.")  # fmt: skip
@click.option("--duration", type=click.FloatRange(min=1.0), metavar="SECONDS",
              help="Stop by itself after SECONDS (default: run until Ctrl-C).")  # fmt: skip
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Where data and logs go (default: a new temporary directory).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
def demo(
    kill_leader_every: float | None,
    signal_name: str,
    session_timeout: float,
    takeover_timeout: float,
    duration: float | None,
    directory: Path | None,
    as_json: bool,
) -> None:
    """Run a local ZooKeeper and three coordinator contenders, and watch failover.

    The leader issues checkpoint ids from a job's counter in ZooKeeper; with
    --kill-leader-every it is killed on schedule, another contender takes over with a
    higher fencing epoch as soon as the leader's lease lapses (--takeover-timeout, not
    the session timeout), and the ids keep rising without ever being reused.
    """
    directory = directory or Path(tempfile.mkdtemp(prefix="sparkpoint-demo-"))
    console = Console()
    events: list[dict[str, Any]] = []

    def emit(event: dict[str, Any]) -> None:
        events.append(event)
        if as_json:
            click.echo(json.dumps(event))
        elif event["event"] == "leader":
            extra = f" after {event['handover_s']} s" if "handover_s" in event else ""
            console.log(
                f"[bold green]{event['leader']}[/] leads with epoch {event['epoch']}{extra}"
            )
        elif event["event"] == "killed":
            console.log(f"[bold red]killed[/] {event['contender']} with SIG{event['signal']}")
        elif event["event"] == "zookeeper":
            console.log(f"ZooKeeper serving at {event['connect_string']}")

    options = DemoOptions(
        directory=directory,
        session_timeout_s=session_timeout,
        takeover_timeout_s=takeover_timeout,
        kill_leader_every_s=kill_leader_every,
        kill_signal=signal.Signals[f"SIG{signal_name}"],
        duration_s=duration,
    )
    runner = Demo(options, emit)
    try:
        if as_json:
            runner.run()
        else:
            with Live(console=console, refresh_per_second=4, transient=True) as live:
                runner.run(lambda d: live.update(_table(d)))
    except KeyboardInterrupt:
        pass
    finally:
        runner.stop()
    summary = runner.summary()
    if as_json:
        click.echo(json.dumps({"event": "summary", **summary}))
    else:
        console.print(_table(runner))
        console.print(
            f"{summary['checkpoint_ids_issued']} checkpoint ids issued, "
            f"{summary['distinct']} distinct, highest {summary['highest']}. "
            f"Logs and ZooKeeper data: {summary['directory']}"
        )
