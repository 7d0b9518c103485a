"""The check that no process of the test session is left a client of a stopped server
(tests/support/leftover_clients.py) can fail: provoked on purpose, it names the process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.kafka import LocalKafka
from tests.support.leftover_clients import ClientWatch, LeftBehind, connected_to
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]

#: A child process with a Kafka consumer it never closes (as a cached client would be).
FORGETFUL_CHILD = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "forgotten"})
consumer.list_topics(timeout=30)
print("connected", flush=True)
sys.stdin.read()
"""


def test_clients_left_behind_are_caught_and_named(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path / "kafka").start()
    watch = ClientWatch()
    child = subprocess.Popen(
        [sys.executable, "-c", FORGETFUL_CHILD, kafka.bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    held: socket.socket | None = None
    try:
        assert child.stdout is not None and child.stdout.readline() == b"connected\n"
        held = socket.create_connection(("127.0.0.1", kafka.nodes[0].port))
        kafka.stop()
        assert [s.port for s in watch.stopped(kafka)] == [kafka.nodes[0].port]

        # This process holds its socket; the child's consumer reconnects on its own.
        def both_caught() -> dict[int, LeftBehind] | None:
            caught = {c.pid: c for c in watch.left_behind()}
            return caught if {os.getpid(), child.pid} <= caught.keys() else None

        caught = wait_until(both_caught, timeout=120, message="both clients caught")
        assert caught[os.getpid()].how == "still connected"
        assert caught[child.pid].command.startswith(sys.executable)  # named by its command
        assert f"to Kafka 127.0.0.1:{kafka.nodes[0].port} after it stopped" in str(
            caught[child.pid]
        )
    finally:
        child.kill()
        child.communicate()  # waits, and closes its pipes
        if held is not None:
            held.close()
        kafka.stop()
    # Once they are gone, nothing is connected any more (what was caught stays reported).
    servers = {s.port: s for s in watch.watched}
    assert connected_to(os.getpid(), servers) == []
    watch.close()


SESSION_TEST = """
import socket
import pytest
from sparkpoint.ops.devcluster.system_servers import PostgresServer
import tempfile, shutil
from pathlib import Path

LEAKED = []

@pytest.fixture(scope="module")
def postgres():
    directory = Path(tempfile.mkdtemp(prefix="sparkpoint-pg-"))
    server = PostgresServer(directory).start()
    yield server
    server.close()
    shutil.rmtree(directory, ignore_errors=True)

def test_uses_the_server(postgres):
    sock = socket.create_connection(("127.0.0.1", postgres.port))
    if {leak}:
        LEAKED.append(sock)  # never closed: a client left behind
    else:
        sock.close()
"""


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["serial", "parallel-workers"])
@pytest.mark.parametrize("leak", [True, False])
def test_a_session_that_leaves_a_client_behind_fails(
    tmp_path: Path, leak: bool, workers: list[str]
) -> None:
    """Also when the tests run in pytest-xdist workers, as the suite does: the worker
    that found the client tells the controller, whose exit status is the run's."""
    (tmp_path / "test_session.py").write_text(textwrap.dedent(SESSION_TEST.format(leak=leak)))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *workers,
         "-p", "tests.support.leftover_clients", "--rootdir", str(tmp_path),
         "-c", os.devnull, str(tmp_path / "test_session.py")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = result.stdout + result.stderr
    if leak:
        assert result.returncode == pytest.ExitCode.TESTS_FAILED, out
        assert "clients of stopped servers left behind" in out
        assert "still connected to PostgreSQL 127.0.0.1:" in out
        assert "1 passed" in out  # the test passed; the session did not
    else:
        assert result.returncode == pytest.ExitCode.OK, out
        assert "left behind" not in out
