"""A file source over a directory of newline-delimited JSON or CSV files.

Splits are files (by name), offsets are byte positions, and each epoch reads at most
``max_bytes_per_split`` of every file, cut after the last complete line: a line still
being written is left for a later epoch. Files that appear later are picked up at the
next epoch, unless the source is ``bounded``: then the files are the whole input, written
before the job reads them, and the source ends once every one is read to its end (so
event time goes to the end and every window fires, as for Flink's bounded file source).
Files are read through sparkpoint's storage, so HDFS directories work too.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sparkpoint.pipeline.sources.base import EpochRange, OffsetSource
from sparkpoint.storage import FileNotFound, filesystem_for
from sparkpoint.storage.uri import parse

#: How far back from a window's end the driver looks for the last newline at first.
_TAIL = 64 * 1024


@dataclass(frozen=True, slots=True)
class LineReader:
    directory: str
    format: str  # "jsonl" or "csv"
    csv_fields: tuple[str, ...] = ()

    def parse(self, line: bytes) -> Any:
        text = line.decode("utf-8")
        if self.format == "jsonl":
            return json.loads(text)
        row = next(csv.reader(io.StringIO(text)))
        return dict(zip(self.csv_fields, row, strict=False)) if self.csv_fields else row

    def read(self, split: EpochRange) -> Iterator[tuple[int, Any]]:
        path = str(parse(self.directory).child(split.split))
        data = filesystem_for(path).read_range(path, split.start, split.end - split.start)
        position = split.start
        for line in data.split(b"\n")[:-1]:  # the range ends right after a newline
            if line.strip():
                yield position, self.parse(line)
            position += len(line) + 1


class FileSource(OffsetSource):
    """``format``: ``"jsonl"`` or ``"csv"`` (``csv_fields`` names the columns; without
    them a row is a list). Files whose name starts with ``.`` or ``_`` are ignored.
    ``max_splits_per_epoch`` bounds how many files one epoch reads from. ``bounded``:
    the directory's files are the whole input (see the module's doc)."""

    def __init__(
        self,
        directory: str,
        *,
        format: str = "jsonl",
        csv_fields: tuple[str, ...] = (),
        max_bytes_per_split: int = 4 * 1024 * 1024,
        max_splits_per_epoch: int | None = None,
        bounded: bool = False,
    ) -> None:
        if format not in ("jsonl", "csv"):
            raise ValueError(f"file source format {format!r}: use 'jsonl' or 'csv'")
        self._directory = directory
        self._fs = filesystem_for(directory)
        self._reader = LineReader(directory, format, tuple(csv_fields))
        self._max_bytes = max_bytes_per_split
        self._max_splits = max_splits_per_epoch
        self._offsets: dict[str, int] = {}
        self._bounded = bounded

    def restore(self, offsets: dict[str, int]) -> None:
        self._offsets.update(offsets)

    def _discover(self) -> dict[str, int]:
        try:
            entries = self._fs.list(self._directory)
        except FileNotFound:
            return {}
        return {
            e.name: e.size for e in entries if not e.is_dir and not e.name.startswith((".", "_"))
        }

    def _last_line_end(self, path: str, start: int, end: int) -> int:
        """The position right after the last newline in [start, end), or ``start``."""
        look_from = max(start, end - _TAIL)
        while True:
            chunk = self._fs.read_range(path, look_from, end - look_from)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                return look_from + cut + 1
            if look_from == start:
                return start
            end, look_from = look_from, max(start, look_from - _TAIL)

    def plan_epoch(self) -> list[EpochRange]:
        ranges = []
        for name, size in sorted(self._discover().items()):
            self._offsets.setdefault(name, 0)
            start = self._offsets[name]
            if size <= start:
                continue
            path = str(parse(self._directory).child(name))
            end = self._last_line_end(path, start, min(size, start + self._max_bytes))
            if end > start:
                ranges.append(EpochRange(name, start, end))
                if self._max_splits is not None and len(ranges) >= self._max_splits:
                    break  # the first files (by name) first, like Spark's maxFilesPerTrigger
        return ranges

    @property
    def exhausted(self) -> bool:
        if not self._bounded:
            return False  # a directory can always get more files
        return all(self._offsets.get(name, 0) >= size for name, size in self._discover().items())

    def reader(self) -> LineReader:
        return self._reader
