"""The `sparkpoint` command line: a thin layer over the library."""

from __future__ import annotations

import click

from sparkpoint import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="sparkpoint")
def main() -> None:
    """sparkpoint: highly available, Flink-grade checkpoints for stateful PySpark pipelines.

    Coordinators elect a leader through ZooKeeper; the leader triggers consistent
    checkpoints of every registered pipeline and keeps them, and their ids, in ZooKeeper
    so that a failover loses and reuses nothing.
    """


def _register_commands() -> None:
    # Each command group lives in its own module; this is the only place that lists them.
    from sparkpoint.ops.cli.demo import demo
    from sparkpoint.ops.cli.drill import drill_group
    from sparkpoint.ops.cli.hdfs import hdfs_group
    from sparkpoint.ops.cli.housekeeping import cancel_command, gc_command
    from sparkpoint.ops.cli.jvm import jvm_group
    from sparkpoint.ops.cli.kafka import kafka_group
    from sparkpoint.ops.cli.metadata import metadata_group
    from sparkpoint.ops.cli.package import package_command
    from sparkpoint.ops.cli.rescale import rescale_command
    from sparkpoint.ops.cli.restore import restore
    from sparkpoint.ops.cli.run import run_command
    from sparkpoint.ops.cli.service import coordinator_group
    from sparkpoint.ops.cli.shared import shared_check_command
    from sparkpoint.ops.cli.state import state_group
    from sparkpoint.ops.cli.status import COMMANDS as STATUS_COMMANDS
    from sparkpoint.ops.cli.status import checkpoints_group, jobs_group
    from sparkpoint.ops.cli.zookeeper import zookeeper_group

    main.add_command(demo)
    main.add_command(drill_group)
    main.add_command(metadata_group)
    main.add_command(restore)
    main.add_command(run_command)
    main.add_command(package_command)
    main.add_command(state_group)
    main.add_command(zookeeper_group)
    main.add_command(hdfs_group)
    main.add_command(jvm_group)
    main.add_command(kafka_group)
    main.add_command(coordinator_group)
    checkpoints_group.add_command(gc_command)
    checkpoints_group.add_command(shared_check_command)
    jobs_group.add_command(cancel_command)
    jobs_group.add_command(rescale_command)
    for command in STATUS_COMMANDS:
        main.add_command(command)


_register_commands()

if __name__ == "__main__":
    main()
