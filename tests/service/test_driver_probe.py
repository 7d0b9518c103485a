"""The leader's liveness probe of a driver process, on real sockets: a listening process
is alive (even frozen: the kernel accepts for it), a closed port is gone, and anything
that proves nothing is unknown — a loopback address included, unless the leader is on
loopback itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from sparkpoint.liveness import Liveness, probe
from sparkpoint.ops.devcluster.zookeeper import free_port
from sparkpoint.pipeline.channels.liveness import LivenessListener, local_host_towards
from tests.support.waiting import wait_until

#: A leader serving on loopback, as every leader of these tests does.
ON_LOOPBACK = "http://127.0.0.1:8081"


def test_a_listening_process_is_alive_and_a_closed_one_gone() -> None:
    listener = LivenessListener("127.0.0.1")
    assert probe(listener.address, 1.0, own_address=ON_LOOPBACK) is Liveness.ALIVE
    listener.close()
    assert probe(listener.address, 1.0, own_address=ON_LOOPBACK) is Liveness.GONE


def test_a_frozen_process_is_still_alive_and_a_killed_one_gone(tmp_path) -> None:
    port_file = tmp_path / "address"
    script = (
        "import sys, threading; "
        "from sparkpoint.pipeline.channels.liveness import LivenessListener; "
        f"l = LivenessListener('127.0.0.1'); open({str(port_file)!r}, 'w').write(l.address); "
        "threading.Event().wait()"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        wait_until(lambda: port_file.exists() and port_file.read_text(), timeout=60,
                   message="the process listens")  # fmt: skip
        address = port_file.read_text()
        os.kill(proc.pid, signal.SIGSTOP)
        # Frozen: the timeout decides, not the probe.
        assert probe(address, 1.0, own_address=ON_LOOPBACK) is Liveness.ALIVE
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert probe(address, 1.0, own_address=ON_LOOPBACK) is Liveness.GONE
    finally:
        proc.kill()
        proc.wait(30)


@pytest.mark.parametrize("address", ["no-port", "host:notaport", ":80", "127.0.0.1:99999"])
def test_an_address_that_proves_nothing_is_unknown(address: str) -> None:
    assert probe(address, 0.2, own_address=ON_LOOPBACK) is Liveness.UNKNOWN


@pytest.mark.parametrize("leader", ["http://10.1.2.3:8081", "sp-0.sp.svc:8081", ""])
def test_a_loopback_driver_is_never_judged_gone_by_a_leader_off_loopback(leader: str) -> None:
    # The driver reached its first coordinator over a port-forward: 127.0.0.1 is its own
    # loopback, not this leader's, whose refusal would say nothing about the driver.
    closed = f"127.0.0.1:{free_port()}"
    assert probe(closed, 0.5, own_address=ON_LOOPBACK) is Liveness.GONE
    assert probe(closed, 0.5, own_address=leader) is Liveness.UNKNOWN
    assert probe(f"localhost:{free_port()}", 0.5, own_address=leader) is Liveness.UNKNOWN


def test_the_driver_advertises_the_address_on_the_route_to_the_coordinator() -> None:
    assert local_host_towards(f"127.0.0.1:{free_port()}") == "127.0.0.1"
    assert local_host_towards("http://127.0.0.1:8080") == "127.0.0.1"
