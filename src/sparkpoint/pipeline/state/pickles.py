"""The one way state values are pickled and unpickled: keyed state entries, operator
state elements (sink transactions, TTL wrappers, window contents, ...).

Pickles name a class by its module path, and checkpoints outlive module paths: a file
written before the pipeline's modules moved into sub-packages names
``sparkpoint.pipeline.windows``, not ``sparkpoint.pipeline.api.windows``. ``loads``
finds such a class where it lives now, so old checkpoints and savepoints still restore.
"""

from __future__ import annotations

import importlib
import io
import pickle
from typing import Any

PROTOCOL = 5

_OLD = "sparkpoint.pipeline."

#: Where each module of the flat pipeline package went (old → new, under
#: ``sparkpoint.pipeline.``); a module split in several lists each part.
MOVED: dict[str, tuple[str, ...]] = {
    "builder": ("api.builder",),
    "functions": ("api.functions",),
    "keyed_state": ("api.keyed_state",),
    "operator_state": ("api.operator_state",),
    "state_ttl": ("api.ttl",),
    "timers": ("api.timers",),
    "event_time": ("api.event_time",),
    "windows": ("api.windows",),
    "stages": ("api.stages",),
    "state_backend": ("state.backend",),
    "state_tasks": ("state.tasks",),
    "rocks_tasks": ("state.rocksdb.tasks",),
    "rocks_store": ("state.rocksdb.store",),
    "store_files": ("state.rocksdb.files",),
    "tasks": ("state.memory.tasks", "runtime.tasks", "state.snapshots"),
    "driver": ("runtime.driver",),
    "driver_clock": ("runtime.clock",),
    "driver_snapshots": ("runtime.snapshots",),
    "driver_status": ("runtime.status",),
    "epoch_plan": ("runtime.epoch_plan",),
    "stage_plan": ("runtime.stage_plan",),
    "keyed_run": ("runtime.keyed_epoch",),
    "partitioner": ("runtime.partitioner",),
    "progress": ("runtime.progress",),
    "session": ("runtime.spark_session",),
    "channel": ("channels.protocol",),
    "embedded": ("channels.embedded",),
    "remote": ("channels.remote",),
    "background": ("channels.background",),
    "liveness": ("channels.liveness",),
    "two_phase": ("sinks.base",),
    "sink": ("sinks.files", "sinks.base"),
    "kafka_sink": ("sinks.kafka",),
    "kafka_admin": ("sinks.kafka_admin",),
    "postgres": ("sinks.postgres",),
    "routed_sink": ("sinks.routed",),
    "state_entries": ("state_processor.entries",),
    "state_processor": ("state_processor.savepoints",),
}

#: Packages that moved whole (old prefix → new prefix).
MOVED_PACKAGES = {"sparkpoint.pipeline.examples": "sparkpoint.examples"}


def dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=PROTOCOL)


def loads(data: bytes) -> Any:
    """``pickle.loads``, finding classes pickled under a module path that has moved."""
    if _OLD.encode() not in data:  # no pipeline class inside: the plain, fast way
        return pickle.loads(data)
    return _Unpickler(io.BytesIO(data)).load()


def current_location(module: str, name: str) -> tuple[str, str]:
    """Where ``module.name`` lives now (unchanged if it did not move)."""
    for old, new in MOVED_PACKAGES.items():
        if module == old or module.startswith(old + "."):
            return new + module[len(old) :], name
    if not module.startswith(_OLD):
        return module, name
    parts = MOVED.get(module[len(_OLD) :])
    if parts is None:
        return module, name
    top = name.partition(".")[0]
    for part in parts:
        if hasattr(importlib.import_module(_OLD + part), top):
            return _OLD + part, name
    return _OLD + parts[0], name


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(*current_location(module, name))
