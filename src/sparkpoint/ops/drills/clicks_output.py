"""``python -m sparkpoint.ops.drills.clicks_output``: the clicks sink's committed lines and
the example's offline expected lines for a bounded input, as JSON on stdout.

Run as its own process by the drill, so that only this short-lived interpreter loads the
pipeline package."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", required=True)
    p.add_argument("--splits", type=int, required=True)
    p.add_argument("--users", type=int, required=True)
    p.add_argument("--records-per-epoch", type=int, required=True)
    p.add_argument("--records-per-split", type=int, required=True)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    from sparkpoint.examples.clicks import expected_output
    from sparkpoint.pipeline.sinks.files import TransactionalFileSink
    from sparkpoint.pipeline.sources.generator import ClickEventSource

    source = ClickEventSource(
        splits=args.splits,
        users=args.users,
        records_per_epoch=args.records_per_epoch,
        records_per_split=args.records_per_split,
        seed=args.seed,
    )
    json.dump(
        {
            "committed": sorted(TransactionalFileSink(args.output).committed_lines()),
            "expected": expected_output(source.all_records()),
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
