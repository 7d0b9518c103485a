"""A bare election contender process: joins the election and, while it leads, issues
checkpoint ids from a job's counter at a steady pace.

It is what failover tests and ``sparkpoint demo`` kill, stop and resume before the full
coordinator exists, and a way to watch the election alone. Run it as
``python -m tests.support.contender --help``. It writes its status as JSON to
``--status`` after every change and appends every id it issues, with its epoch, to
``--status``.ids.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from sparkpoint.config import ZooKeeperSettings
from sparkpoint.counter import ZooKeeperCheckpointIDCounter
from sparkpoint.ha import (
    HAError,
    ZooKeeperConnection,
    ZooKeeperLeaderElection,
    ZooKeeperLeadership,
)

log = logging.getLogger("sparkpoint.contender")


class Contender:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        settings = ZooKeeperSettings(
            quorum=args.quorum,
            root=args.root,
            cluster_id=args.cluster_id,
            session_timeout_s=args.session_timeout,
            connection_timeout_s=30.0,
            retry_wait_s=0.05,
            lease_renew_interval_s=args.renew_interval,
            takeover_timeout_s=args.takeover_timeout,
        )
        self.conn = ZooKeeperConnection(settings)
        self.election = ZooKeeperLeaderElection(
            self.conn,
            instance_id=args.instance_id,
            address=f"pid:{os.getpid()}",
        )
        self.status_path = Path(args.status) if args.status else None
        self.ids_path = Path(f"{args.status}.ids") if args.status else None
        self.stopping = threading.Event()
        self.issued = 0
        self._last_status = ""

    def run(self) -> int:
        self.conn.start()
        self.election.start()
        # Status is written from its own thread: the work loop may block in a ZooKeeper
        # call for as long as kazoo takes to notice a dead link.
        reporter = threading.Thread(target=self._report, name="status", daemon=True)
        reporter.start()
        counter: ZooKeeperCheckpointIDCounter | None = None
        term: ZooKeeperLeadership | None = None
        next_work = time.monotonic()
        while not self.stopping.is_set():
            lead = self.election.leadership
            if lead is not term:
                term, counter = lead, None
            if lead is not None and self.args.job and time.monotonic() >= next_work:
                next_work = time.monotonic() + self.args.work_interval
                counter = counter or self._counter(lead)
                if counter is not None and lead.can_act():
                    self._issue(counter, lead)
            self.stopping.wait(0.02)
        self.election.stop()
        self.conn.close()
        reporter.join(5)
        self._write_status(final=True)
        return 0

    def _report(self) -> None:
        while not self.stopping.is_set():
            self._write_status()
            self.stopping.wait(0.02)

    def _counter(self, lead: ZooKeeperLeadership) -> ZooKeeperCheckpointIDCounter | None:
        counter = ZooKeeperCheckpointIDCounter(self.conn, self.args.job, lead.fence)
        try:
            counter.start()
        except HAError as exc:
            log.warning("counter not started: %s", exc)
            return None
        return counter

    def _issue(self, counter: ZooKeeperCheckpointIDCounter, lead: ZooKeeperLeadership) -> None:
        try:
            checkpoint_id = counter.get_and_increment()
        except HAError as exc:  # fenced or disconnected: the election decides what follows
            log.warning("no id issued: %s", exc)
            return
        self.issued += 1
        assert self.ids_path is not None
        with open(self.ids_path, "a") as out:
            out.write(f"{lead.epoch} {checkpoint_id}\n")

    def status(self) -> dict[str, Any]:
        fenced = REGISTRY.get_sample_value("sparkpoint_fenced_writes_total") or 0.0
        return {
            **self.election.status(),
            "pid": os.getpid(),
            "fenced_writes": int(fenced),
            "issued": self.issued,
            "session_id": self.conn.session_id,
        }

    def _write_status(self, *, final: bool = False) -> None:
        if self.status_path is None:
            return
        status = self.status()
        if final:
            status["state"] = "stopped"
        text = json.dumps(status, sort_keys=True)
        if text == self._last_status:
            return
        self._last_status = text
        tmp = self.status_path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.status_path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.contender",
        description="Join a sparkpoint leader election and, as leader, issue checkpoint ids.",
    )
    parser.add_argument("--quorum", required=True, help="ZooKeeper connect string")
    parser.add_argument("--root", default="sparkpoint", help="root znode (default sparkpoint)")
    parser.add_argument("--cluster-id", default="default", help="cluster id (default default)")
    parser.add_argument("--instance-id", required=True, help="this contender's name")
    parser.add_argument("--session-timeout", type=float, default=30.0, help="seconds")
    parser.add_argument("--renew-interval", type=float, default=0.5, help="lease renewal (s)")
    parser.add_argument(
        "--takeover-timeout", type=float, default=0.0,
        help="take over a leader silent this long (s); 0: wait for its session to expire",
    )  # fmt: skip
    parser.add_argument("--status", help="file to keep this contender's JSON status in")
    parser.add_argument("--job", help="as leader, issue ids from this job's counter")
    parser.add_argument("--work-interval", type=float, default=0.1, help="seconds between ids")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    contender = Contender(args)
    signal.signal(signal.SIGTERM, lambda *_: contender.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: contender.stopping.set())
    return contender.run()


if __name__ == "__main__":
    raise SystemExit(main())
