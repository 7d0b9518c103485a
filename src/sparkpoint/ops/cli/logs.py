"""Log output of long-running commands: plain text for a terminal, or one JSON object per
line for a log pipeline (Kubernetes, Loki, Elasticsearch)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message"}`` plus ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str = "info", fmt: str = "text") -> None:
    """Root logging to stderr at ``level`` in ``fmt``; kazoo's chatter kept to warnings."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    quieter = max(logging.WARNING, logging.getLevelName(level.upper()))
    logging.getLogger("kazoo.client").setLevel(quieter)
