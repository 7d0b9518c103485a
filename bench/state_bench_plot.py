"""The curve of bench/state_bench.py: epoch seconds and MiB written per checkpoint against
the number of keys, per system and key distribution (a --results file → one PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLOURS = {"memory": "#999999", "rocksdb": "#d62728", "ss": "#1f77b4",
           "ss-python": "#17becf", "flink": "#2ca02c"}  # fmt: skip
LABELS = {"memory": "sparkpoint memory", "rocksdb": "sparkpoint rocksdb",
          "ss": "Structured Streaming (built-in)", "ss-python": "Structured Streaming (Python)",
          "flink": "Flink 2.3 RocksDB"}  # fmt: skip


def plot(rows: list[dict[str, Any]], target: Path) -> Path:
    import logging

    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.6))
    for system, colour in COLOURS.items():
        for dist, style in (("hot", "-"), ("uniform", "--")):
            found = sorted(
                (r for r in rows if r["system"] == system and r["dist"] == dist
                 and "error" not in r),
                key=lambda r: r["keys"],
            )  # fmt: skip
            if not found:
                continue
            label = f"{LABELS[system]}, {dist}"
            epochs = [(r["keys"], r.get("epoch_s") or r.get("epoch_checkpoint_s")) for r in found]
            epochs = [(k, s) for k, s in epochs if s]
            if epochs:
                left.plot(*zip(*epochs, strict=True), style, marker="o", color=colour,
                          label=label)  # fmt: skip
            written = [(r["keys"], r["written_bytes"] / 2**20) for r in found]
            right.plot(*zip(*written, strict=True), style, marker="o", color=colour,
                       label=label)  # fmt: skip
    left.set(xscale="log", yscale="log", xlabel="keys",
             ylabel="s per 200,000-record epoch (SS: micro-batch)",
             title="Epoch time")  # fmt: skip
    right.set(xscale="log", yscale="log", xlabel="keys", ylabel="MiB written per checkpoint",
              title="Bytes per checkpoint")  # fmt: skip
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
    handles, labels = right.get_legend_handles_labels()  # every system has bytes
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    return target
