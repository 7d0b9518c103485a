"""A drill's report: every iteration's figures and invariant results, as JSON, a human
summary (a rich table) and a PNG plot of failover times per iteration."""

from __future__ import annotations

import io
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkpoint.ops.drills.invariants import Invariant
from sparkpoint.ops.drills.phases import PHASES


@dataclass
class IterationResult:
    iteration: int
    action: str  # e.g. "SIGKILL coordinator-2", "server 3 of 3 stopped"
    time_to_leader_s: float | None = None
    time_to_checkpoint_s: float | None = None
    old_epoch: int | None = None
    new_epoch: int | None = None
    new_leader: str | None = None
    invariants: list[Invariant] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    # Where the time to the first checkpoint went (sparkpoint.ops.drills.phases).
    phases: dict[str, float | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.invariants)

    def to_dict(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "action": self.action,
            "time_to_leader_s": _round(self.time_to_leader_s),
            "time_to_checkpoint_s": _round(self.time_to_checkpoint_s),
            "old_term": self.old_epoch,
            "new_term": self.new_epoch,
            "old_epoch": self.old_epoch,  # deprecated aliases of old_term/new_term
            "new_epoch": self.new_epoch,
            "new_leader": self.new_leader,
            "invariants": [i.to_dict() for i in self.invariants],
            "ok": self.ok,
            **({"phases": self.phases} if self.phases else {}),
            **({"notes": self.notes} if self.notes else {}),
        }


@dataclass
class DrillReport:
    drill: str
    config: dict[str, Any]
    iterations: list[IterationResult] = field(default_factory=list)
    # Checks over the whole run (ids over every iteration, exactly-once at the end).
    overall: list[Invariant] = field(default_factory=list)
    # Checkpoints the drivers were told were aborted (declined, expired, superseded run):
    # not a violation by themselves, but a failover should not cost any.
    aborted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        found = [f"iteration {r.iteration}: {i.name}: {i.detail}"
                 for r in self.iterations for i in r.invariants if not i.ok]  # fmt: skip
        return found + [f"overall: {i.name}: {i.detail}" for i in self.overall if not i.ok]

    @property
    def ok(self) -> bool:
        return not self.violations

    def figures(self) -> dict[str, Any]:
        leader = [r.time_to_leader_s for r in self.iterations if r.time_to_leader_s is not None]
        ckpt = [r.time_to_checkpoint_s for r in self.iterations
                if r.time_to_checkpoint_s is not None]  # fmt: skip
        # A coordinator failover is bounded by the session timeout; a driver's is not.
        session = None if self.drill == "kill-driver" else self.config.get("session_timeout_s")
        out: dict[str, Any] = {"iterations": len(self.iterations),
                               "aborted_checkpoints": len(self.aborted)}  # fmt: skip
        for name, values in (("time_to_leader_s", leader), ("time_to_checkpoint_s", ckpt)):
            if values:
                out[name] = {
                    "median": _round(statistics.median(values)),
                    "max": _round(max(values)),
                    "min": _round(min(values)),
                }
                if session:
                    out[name]["median_over_session_timeout"] = round(
                        statistics.median(values) / session, 3
                    )
        medians = {
            name: _round(statistics.median(values))
            for name in self.phase_names()
            if (values := [v for r in self.iterations if (v := r.phases.get(name)) is not None])
        }
        if medians:
            out["phases_median_s"] = medians
        return out

    def phase_names(self) -> list[str]:
        """The phases the iterations measured: a leader failover's (``PHASES``) in their
        order, then any other drill's in the order first recorded."""
        seen = list(dict.fromkeys(name for r in self.iterations for name in r.phases))
        return [n for n in PHASES if n in seen] + [n for n in seen if n not in PHASES]

    def to_dict(self) -> dict[str, Any]:
        return {
            "drill": self.drill,
            "ok": self.ok,
            "config": self.config,
            "figures": self.figures(),
            "iterations": [r.to_dict() for r in self.iterations],
            "overall": [i.to_dict() for i in self.overall],
            "aborted_checkpoints": self.aborted,
            "violations": self.violations,
        }

    # --- renderings ---------------------------------------------------------------------

    def summary_text(self, width: int = 110) -> str:
        from rich.console import Console

        buffer = io.StringIO()
        console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
        console.print(self.table())
        for line in self.summary_lines():
            console.print(line)
        return buffer.getvalue()

    def table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"sparkpoint drill {self.drill}")
        for column in ("#", "action", "to new leader", "to 1st checkpoint", "term", "invariants"):
            table.add_column(column)
        for r in self.iterations:
            table.add_row(
                str(r.iteration),
                r.action,
                _secs(r.time_to_leader_s),
                _secs(r.time_to_checkpoint_s),
                f"{r.old_epoch}→{r.new_epoch}" if r.new_epoch is not None else "-",
                "ok"
                if r.ok
                else "VIOLATED: " + ", ".join(i.name for i in r.invariants if not i.ok),
            )
        return table

    def summary_lines(self) -> list[str]:
        lines = []
        fig = self.figures()
        session = self.config.get("session_timeout_s")
        by_it = "by the new driver" if self.drill == "kill-driver" else "by it"
        for name, label in (("time_to_leader_s", "new leader"),
                            ("time_to_checkpoint_s", f"first checkpoint {by_it}")):  # fmt: skip
            if name in fig:
                f = fig[name]
                ratio = (f" = {f['median_over_session_timeout']:.2f} x the {session:g} s session"
                         " timeout") if "median_over_session_timeout" in f else ""  # fmt: skip
                lines.append(f"{label}: median {f['median']:.2f} s{ratio}, max {f['max']:.2f} s")
        if "phases_median_s" in fig:
            medians = ", ".join(f"{k} {v:.2f} s" for k, v in fig["phases_median_s"].items())
            lines.append(f"phases (median): {medians}")
        for inv in self.overall:
            lines.append(f"{inv.name}: {'ok' if inv.ok else 'VIOLATED'} ({inv.detail})")
        planned = self.config.get("planned_iterations")
        if planned and planned != len(self.iterations):
            lines.append(f"ran {len(self.iterations)} of {planned} planned iterations"
                         + (" (time limit)" if "stopped_by_time_limit_s" in self.config
                            else ""))  # fmt: skip
        reasons = sorted({str(a.get("reason")) for a in self.aborted})
        lines.append(f"checkpoints aborted: {len(self.aborted)}"
                     + (f" ({'; '.join(reasons)[:300]})" if reasons else ""))  # fmt: skip
        lines.append("invariants: all held" if self.ok
                     else f"invariants: {len(self.violations)} VIOLATED")  # fmt: skip
        if self.config.get("directory"):
            lines.append(f"logs, checkpoints and ZooKeeper data: {self.config['directory']}")
        return lines

    def plot(self, path: Path) -> None:
        # Agg and a lazy import: no display needed, and no matplotlib cost unless plotting.
        try:
            import matplotlib
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(
                "drill plots need matplotlib: install sparkpoint[drills]"
            ) from e

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        xs = [r.iteration for r in self.iterations]
        with_phases = any(r.phases for r in self.iterations)
        if with_phases:
            fig, (ax, bars) = plt.subplots(2, 1, figsize=(8, 8), dpi=100, sharex=True)
            self._plot_phases(bars)
        else:
            fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        series = (
            ("time_to_leader_s", "to new leader", "o"),
            ("time_to_checkpoint_s", "to first checkpoint", "s"),
        )
        for attr, label, marker in series:
            if all(getattr(r, attr) is None for r in self.iterations):
                continue  # e.g. no leader change in a driver drill
            ys = [getattr(r, attr) for r in self.iterations]
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], marker=marker,
                    label=label)  # fmt: skip
        bad = [r.iteration for r in self.iterations if not r.ok]
        for x in bad:
            ax.axvline(x, color="red", alpha=0.3)
        bounds = ((("driver_takeover_timeout_s", "driver takeover timeout"),)
                  if self.drill == "kill-driver" else
                  (("takeover_timeout_s", "lease takeover timeout"),
                   ("session_timeout_s", "session timeout")))  # fmt: skip
        plotted = [v for r in self.iterations for a, _, _ in series
                   if (v := getattr(r, a)) is not None]  # fmt: skip
        drawn, off_scale = bounds_on_scale(
            max(plotted, default=0.0), [(label, self.config.get(key)) for key, label in bounds]
        )
        for label, value in drawn:
            ax.axhline(value, linestyle="--", linewidth=1, color="grey")
            ax.annotate(f"{label} {value:g} s", (xs[0] if xs else 1, value),
                        textcoords="offset points", xytext=(0, 3), fontsize=8)  # fmt: skip
        if off_scale:  # named, not drawn: a 30 s line would flatten 0-2 s figures
            note = ", ".join(f"{label} {value:g} s" for label, value in off_scale)
            fig.text(0.01, 0.005, f"above the scale (not drawn): {note}", fontsize=8,
                     color="grey", ha="left", va="bottom")  # fmt: skip
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("" if with_phases else "iteration")
        ax.set_ylabel("seconds after the signal")
        signal = self.config.get("signal", "")
        ax.set_title(f"sparkpoint drill {self.drill} {signal}".strip())
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(path)
        plt.close(fig)

    def _plot_phases(self, ax: Any) -> None:
        """One stacked bar per iteration: where the time to the first checkpoint went."""
        xs = [r.iteration for r in self.iterations]
        bottom = [0.0] * len(xs)
        for name in self.phase_names():
            heights = [r.phases.get(name) or 0.0 for r in self.iterations]
            ax.bar(xs, heights, bottom=bottom, label=name, width=0.8)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_xlabel("iteration")
        ax.set_ylabel("seconds after the fault")
        ax.set_title("where the time to the first checkpoint went")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, ncol=3)

    def write(self, directory: Path) -> dict[str, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = {
            "json": directory / "report.json",
            "summary": directory / "summary.txt",
            "plot": directory / "failover.png",
        }
        paths["json"].write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        paths["summary"].write_text(self.summary_text())
        self.plot(paths["plot"])
        return paths


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def _secs(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "-"


#: A bound line is drawn when it is at most this many times the largest figure plotted.
BOUND_SCALE = 3.0


def bounds_on_scale(
    top: float, bounds: list[tuple[str, float | None]]
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Split the chart's reference lines (label, seconds) into those drawn and those only
    named: a line far above every figure would squash the figures into the bottom.

    >>> bounds_on_scale(1.8, [("lease takeover timeout", 1.5), ("session timeout", 30.0)])
    ([('lease takeover timeout', 1.5)], [('session timeout', 30.0)])
    """
    drawn, off = [], []
    for label, value in bounds:
        if value:
            (drawn if top <= 0 or value <= BOUND_SCALE * top else off).append((label, value))
    return drawn, off
