"""The store server of one host and driver process: a long-lived process that holds the
subtask stores under ``<root>/sparkpoint-state/<job>/<process tag>`` open across epochs
(``python -m sparkpoint.pipeline.state.rocksdb.server DIRECTORY IDLE_SECONDS``).

Why a process of its own: PySpark runs each task in whichever Python worker of the
executor is idle, so the next task of a subtask may run in another process, and RocksDB's
lock file lets one process at a time open a store. Opened once here, a store keeps its
block cache warm and its memtable unflushed from one epoch to the next, and the undo of
its last step in memory (store.py). The tasks talk to it through client.py over a Unix
socket (``multiprocessing.connection``, authenticated with the key file of the
directory); every request names its store by path.

It ends, closing every store (which writes each last step's undo into its store), when
told to (the driver's close), when idle for ``IDLE_SECONDS``, or when its directory is
removed (then without closing: the stores are gone). Killed instead, it leaves every
store at its last committed step, with no undo (a retry of that step is refused).
Never imports pyspark.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

from sparkpoint.pipeline.state.rocksdb.store import StoreMismatch, SubtaskStore

KEY_FILE = "server.key"
PID_FILE = "server.pid"
LOG_FILE = "server.log"
LOCK_FILE = "server.lock"
#: How often the server looks at its directory and its idle time.
WATCH_INTERVAL_S = 1.0


def socket_path(directory: Path) -> str:
    """A short path (Unix socket paths are limited to ~100 bytes), one per directory."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:20]
    return str(Path(tempfile.gettempdir(), f"sparkpoint-store-{digest}.sock"))


class _Held:
    """One open store and the lock that serialises the requests on it."""

    def __init__(self, store: SubtaskStore) -> None:
        self.store = store
        self.lock = threading.Lock()


class StoreServer:
    def __init__(self, directory: Path, idle_s: float) -> None:
        self.directory = directory
        self.idle_s = idle_s
        self._stores: dict[str, _Held] = {}
        #: Per store path, how many times this server opened it (reported by "status").
        self._opened: dict[str, int] = {}
        self._lock = threading.Lock()
        self._busy = 0
        self._last_request = time.monotonic()
        self._stopping = threading.Event()
        authkey = (directory / KEY_FILE).read_bytes()
        self._address = socket_path(directory)
        with contextlib.suppress(FileNotFoundError):
            Path(self._address).unlink()  # a dead server's
        self._listener = Listener(self._address, "AF_UNIX", authkey=authkey)

    # -- serving ----------------------------------------------------------------------

    def serve(self) -> None:
        (self.directory / PID_FILE).write_text(str(os.getpid()))
        threading.Thread(target=self._watch, name="watch", daemon=True).start()
        while not self._stopping.is_set():
            try:
                conn = self._listener.accept()
            except OSError:
                break  # the listener was closed: stopping
            except Exception:
                continue
            threading.Thread(target=self._serve_client, args=(conn,), daemon=True).start()

    def _serve_client(self, conn: Connection) -> None:
        with conn:
            while not self._stopping.is_set():
                try:
                    request = conn.recv()
                except (EOFError, OSError):
                    return  # the worker closed it, or died
                with self._lock:
                    self._busy += 1
                try:
                    reply = self._handle(request)
                except StoreMismatch as exc:
                    reply = ("mismatch", str(exc))
                except Exception as exc:
                    reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                finally:
                    with self._lock:
                        self._busy -= 1
                        self._last_request = time.monotonic()
                try:
                    conn.send(reply)
                except OSError:
                    return
                if request[0] == "stop":
                    self.stop(close_stores=True)

    def _handle(self, request: tuple[Any, ...]) -> tuple[str, Any]:
        op, *args = request
        if op == "stop":
            return "ok", None
        if op == "status":
            with self._lock:
                return "ok", {"pid": os.getpid(), "opened": dict(self._opened)}
        if self._stopping.is_set():
            raise RuntimeError("the store server is stopping")
        path = args[0]
        if op == "open":
            return "ok", self._open(path, args[1])
        if op == "release":
            self._release(path)
            return "ok", None
        held = self._stores.get(path)
        if held is None:
            raise StoreMismatch(f"the store at {path} is not open in the store server")
        with held.lock:
            return "ok", _call(held.store, op, args[1:])

    def _open(self, path: str, settings: Any) -> tuple[int, str] | None:
        with self._lock:
            held = self._stores.get(path)
            if held is None:
                store = SubtaskStore.open_existing(Path(path), settings)
                if store is None:
                    return None
                held = self._stores[path] = _Held(store)
                self._opened[path] = self._opened.get(path, 0) + 1
        with held.lock:
            return held.store.version, held.store.instance

    def _release(self, path: str) -> None:
        """Close a store so that a task may build it again in its place."""
        with self._lock:
            held = self._stores.pop(path, None)
        if held is not None:
            with held.lock:
                held.store.close()

    # -- ending -----------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_S):
            if not self.directory.is_dir():
                self.stop(close_stores=False)
                return
            with self._lock:
                idle = self._busy == 0 and time.monotonic() - self._last_request > self.idle_s
            if idle:
                self.stop(close_stores=True)
                return

    def stop(self, *, close_stores: bool) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._listener.close()
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for held in stores:
            with held.lock:
                if close_stores:
                    held.store.close()
        with contextlib.suppress(FileNotFoundError):
            Path(self._address).unlink()
        with contextlib.suppress(FileNotFoundError):
            (self.directory / PID_FILE).unlink()
        os._exit(0)  # the client threads may sit in recv(): no need to wait for them


def _call(store: SubtaskStore, op: str, args: list[Any]) -> Any:
    if op == "prepare":
        store.prepare_step(args[0])
        return store.version
    if op == "get":
        return store.get_many(args[0])
    if op == "commit":
        return store.commit_step(args[0], args[1])
    if op == "page":
        return store.page(*args)
    if op == "checkpoint":
        store.checkpoint(Path(args[0]))
        return None
    raise ValueError(f"unknown store server request {op!r}")


def main(directory: Path, idle_s: float) -> None:
    # Detach: the worker that started the server waits for this first process only;
    # the server itself is reparented and outlives the worker.
    if os.fork() > 0:
        os._exit(0)
    server = StoreServer(directory, idle_s)
    server.serve()


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]))
