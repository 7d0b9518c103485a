"""Nexmark events as files, deterministic by event number.

``python -m sparkpoint.ops.devcluster.nexmark --events N --splits P --out DIR`` writes the
first N events of the Nexmark stream (persons, auctions and bids, 1 : 3 : 46, hot
sellers, bidders and auctions) as JSON lines, one file per split: split k holds events
k, k+P, k+2P, … — every split goes through event time at the same pace, as Flink's
parallel generator instances do. The generator is the ``nexmark`` crate's CLI (built
pinned into the cache by cargo.py), one process per split (``--offset k --step P``).

Its CLI stamps event time from the wall clock: event n gets ``start + t(n)``, ``start``
the moment the process began and ``t(n)`` the crate's own schedule (10 000 events a
second of event time). Every event's ``date_time`` and ``expires`` are moved so that
``start`` becomes ``base_time_ms``: the same N events are then the same bytes on every
run. ``_nexmark.json`` (ignored by the file source) records how the files were made, so
a directory made with the same settings is reused. ``_side_input.csv`` beside them is the
suite's side input of q13 (rows ``i,i`` for i below 10 000).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sparkpoint.ops.devcluster.cargo import CRATES, binary

#: 2026-01-01T00:00:00Z: where event time starts unless told otherwise.
BASE_TIME_MS = 1_767_225_600_000
#: The crate's default rate (events per second of event time), which its CLI cannot change.
CRATE_EVENTS_PER_SECOND = 10_000
MANIFEST = "_nexmark.json"
#: The suite's side input of q13: rows ``i,i`` for i below 10 000 (a name the source skips).
SIDE_INPUT, SIDE_INPUT_ROWS = "_side_input.csv", 10_000
_TIMES = re.compile(rb'"(date_time|expires)":(\d+)')


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def crate_time_offset_ms(event_number: int) -> int:
    """``t(n)``: the crate's event time of event n less its base time, computed as the
    crate does (in f32: ``round(n * 100 µs / 1000)``, rounding half away from zero)."""
    delay_us = _f32(1_000_000 / CRATE_EVENTS_PER_SECOND)
    return math.floor(_f32(_f32(_f32(event_number) * delay_us) / 1000.0) + 0.5)


def split_file(k: int) -> str:
    return f"events-{k:04d}.jsonl"


def _write_split(
    generator: Path, directory: Path, k: int, splits: int, events: int, base_time_ms: int
) -> None:
    count = len(range(k, events, splits))
    command = [str(generator), "--number", str(count), "--offset", str(k),
               "--step", str(splits), "--no-wait"]  # fmt: skip
    partial = directory / f".{split_file(k)}.partial"
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()  # event k: its time gives the process's start
        stamp = _TIMES.search(first)
        if stamp is None:
            raise RuntimeError(f"nexmark generator: no date_time in {first[:200]!r}")
        shift = base_time_ms - (int(stamp.group(2)) - crate_time_offset_ms(k))

        def moved(m: re.Match[bytes]) -> bytes:
            return b'"%s":%d' % (m[1], int(m[2]) + shift)

        with partial.open("wb") as out:
            out.write(_TIMES.sub(moved, first))
            for line in process.stdout:
                out.write(_TIMES.sub(moved, line))
        stderr = process.stderr.read()
    if process.returncode != 0:
        raise RuntimeError(f"nexmark generator failed ({process.returncode}): {stderr[-2000:]!r}")
    partial.rename(directory / split_file(k))


def write_events(
    directory: str | Path, events: int, *, splits: int = 4, base_time_ms: int = BASE_TIME_MS
) -> Path:
    """The first ``events`` events in ``splits`` files under ``directory`` (made if
    missing; reused when it holds the same events already). Returns the directory."""
    if not 1 <= splits <= events:
        raise ValueError(
            f"nexmark events: need 1 ≤ splits ≤ events, got {splits} splits of {events} events"
        )
    directory = Path(directory)
    spec = CRATES["nexmark"]
    manifest = {
        "generator": f"{spec.name} {spec.version}",
        "events": events,
        "splits": splits,
        "base_time_ms": base_time_ms,
        "side_input_rows": SIDE_INPUT_ROWS,
    }
    recorded = directory / MANIFEST
    if recorded.exists() and json.loads(recorded.read_text()) == manifest:
        return directory
    if directory.exists() and any(p.name != MANIFEST for p in directory.iterdir()):
        raise FileExistsError(
            f"{directory} holds other files than Nexmark events of {manifest}: "
            "give an empty or new directory"
        )
    directory.mkdir(parents=True, exist_ok=True)
    recorded.unlink(missing_ok=True)
    generator = binary("nexmark")
    with ThreadPoolExecutor(max_workers=min(splits, 8)) as pool:
        done = [
            pool.submit(_write_split, generator, directory, k, splits, events, base_time_ms)
            for k in range(splits)
        ]
        for future in done:
            future.result()
    (directory / SIDE_INPUT).write_text("".join(f"{i},{i}\n" for i in range(SIDE_INPUT_ROWS)))
    recorded.write_text(json.dumps(manifest) + "\n")
    return directory


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, required=True, help="how many events (all kinds)")
    p.add_argument("--splits", type=int, default=4, help="files, read in parallel (default 4)")
    p.add_argument("--out", required=True, help="the directory the files go to")
    p.add_argument(
        "--base-time-ms",
        type=int,
        default=BASE_TIME_MS,
        help="event time of event 0, ms since the epoch (default 2026-01-01T00:00Z)",
    )
    args = p.parse_args(argv)
    try:
        out = write_events(args.out, args.events, splits=args.splits,
                           base_time_ms=args.base_time_ms)  # fmt: skip
    except (ValueError, FileExistsError) as e:
        p.error(str(e))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
