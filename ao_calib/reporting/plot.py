"""Training curves of one run, from its ``metrics.jsonl`` (task-agnostic: groups by key name only).

    python -m ao_calib.plot RUN [--out FILE]      # default FILE: RUN/plots/training_curves.png
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ao_calib.run_dir import RunDir, as_number, read_metrics_counted, series

_EVAL_PREFIXES = ("eval/", "val/", "eval_")
_EVAL_NOISE = re.compile(r"(runtime|samples_per_second|steps_per_second)$")


def _is_eval(key: str) -> bool:
    return key.startswith(_EVAL_PREFIXES) and not _EVAL_NOISE.search(key)


# (subplot title, y label, does this key belong here?) -- a key goes to the first group that takes it.
GROUPS: list[tuple[str, str, Callable[[str], bool]]] = [
    ("eval / validation", "value", _is_eval),
    ("loss", "loss", lambda k: k == "loss" or k.startswith("loss/")),
    ("reward", "reward", lambda k: k == "reward" or (k.startswith("rewards/") and k.endswith("/mean"))),
    ("KL", "kl", lambda k: k == "kl" or k.startswith("kl/")),
    ("learning rate", "lr", lambda k: k in ("learning_rate", "lr")),
]
_ORDER = ["loss", "reward", "eval / validation", "KL", "learning rate"]


def group_keys(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{group title: [keys with at least one numeric value]}``, groups without data left out."""
    numeric: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in numeric and as_number(value) is not None:
                numeric.append(key)
    grouped: dict[str, list[str]] = {}
    for key in numeric:
        for title, _, belongs in GROUPS:
            if belongs(key):
                grouped.setdefault(title, []).append(key)
                break
    return {title: grouped[title] for title in _ORDER if title in grouped}


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw a run's training curves to ``out`` (default ``RUN/plots/training_curves.png``).

    One subplot per group that has data: loss; reward and ``rewards/*/mean``; eval/validation
    metrics; KL; learning rate. Returns the written paths, or ``[]`` when nothing could be plotted.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    run = Path(run_dir)
    rows, skipped = read_metrics_counted(run)
    groups = group_keys(rows)
    if not groups:
        return []
    labels = {title: ylabel for title, ylabel, _ in GROUPS}
    fig = Figure(figsize=(9, 2.8 * len(groups) + 0.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (title, keys) in zip(axes, groups.items()):
        for key in keys:
            xs, ys = series(rows, key)
            sparse = len(xs) < 30
            (line,) = ax.plot(xs, ys, marker="o" if sparse else None, markersize=3, label=key)
            if key == "reward":
                _std_band(ax, rows, xs, ys, line.get_color())
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(labels[title])
        ax.grid(True, alpha=0.3)
        if title == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        if len(keys) > 1 or title == "eval / validation":
            ax.legend(fontsize="small" if len(keys) <= 8 else "x-small", loc="best")
    axes[-1].set_xlabel("step")
    note = f" ({skipped} unreadable line(s) skipped)" if skipped else ""
    fig.suptitle(f"{run.resolve().name}{note}")
    fig.tight_layout()
    target = Path(out) if out is not None else RunDir(run).curves_plot()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    return [target]


def _std_band(ax: Any, rows: list[dict[str, Any]], xs: list[float], ys: list[float], color: str) -> None:
    """Shade reward ± reward_std where both were logged on the same row."""
    sx, sy = series(rows, "reward_std")
    std = dict(zip(sx, sy))
    points = [(x, y, std[x]) for x, y in zip(xs, ys) if x in std]
    if len(points) > 1:
        px, py, ps = zip(*points)
        ax.fill_between(px, [y - s for y, s in zip(py, ps)], [y + s for y, s in zip(py, ps)],
                        color=color, alpha=0.15, linewidth=0, label="reward ± std")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ao_calib.plot", description="Plot a run's training curves.")
    parser.add_argument("run", type=Path, help="a run directory (holding metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=None, help="PNG to write (default: RUN/plots/training_curves.png)")
    args = parser.parse_args(argv)
    if not args.run.is_dir():
        print(f"error: {args.run}: no such directory", file=sys.stderr)
        return 2
    metrics = RunDir(args.run).metrics
    if not metrics.is_file():
        print(f"error: {args.run}: no {metrics.name} (not a run directory, or the run logged nothing)", file=sys.stderr)
        return 2
    paths = plot_run(args.run, args.out)
    if not paths:
        print(f"error: {metrics}: nothing to plot (no numeric loss/reward/eval/kl/lr values)", file=sys.stderr)
        return 1
    for path in paths:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
