"""Sources: deterministic given offsets, so Spark can recompute a lost partition."""

from sparkpoint.pipeline.sources.base import EpochRange, Source, SplitReader
from sparkpoint.pipeline.sources.files import FileSource
from sparkpoint.pipeline.sources.generator import ClickEventSource

__all__ = ["ClickEventSource", "EpochRange", "FileSource", "Source", "SplitReader"]
