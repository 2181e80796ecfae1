"""Tabulate a set of run directories (one run or a whole sweep): CSV, Markdown and reward curves.

    python -m ao_calib.report outputs/multiruns/2025-01-01/12-00-00 [out=DIR]
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from ao_calib.core.command_options import Command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import Checked, setting
from ao_calib.reporting.plot import continuous_curve, sweep_title
from ao_calib.runs.records import RunRecord, SweepFiles, load_runs

MISSING = "—"
FIXED_COLUMNS = ("run", "status", "final_reward", "wall_time_s", "steps", "error")
_STATUS_MARK = {"completed": "completed", "failed": "**failed**", "crashed": "**crashed**",
                "unfinished": "_unfinished_"}


def swept_keys(records: Sequence[RunRecord]) -> list[str]:
    """Override keys whose value differs across runs (absent counts as a value); all keys for one run.

    ``hydra.*`` overrides (output paths, job names) are never treated as swept parameters.
    """
    keys = sorted({k for r in records for k in r.overrides if not k.startswith("hydra.")})
    if len(records) == 1:
        return keys
    return [k for k in keys if len({r.overrides.get(k) for r in records}) > 1]


def _column_for(key: str) -> str:
    return f"override:{key}" if key in FIXED_COLUMNS else key


def records_frame(records: Sequence[RunRecord]) -> pd.DataFrame:
    """One row per run: run, status, swept keys, final_reward, eval/*, the last step figures as train/*
    (``calibration/*``, ``kl``, ``advantage_std``), wall_time_s, steps, error."""
    keys = swept_keys(records)
    eval_names = sorted({k for r in records for k in r.eval_metrics})
    train_names = sorted({k for r in records for k in r.train_metrics})
    rows: list[dict[str, Any]] = []
    for r in records:
        row: dict[str, Any] = {"run": r.name, "status": r.status}
        row.update({_column_for(k): r.overrides.get(k) for k in keys})
        row["final_reward"] = r.final_reward
        row.update({f"eval/{k}": r.eval_metrics.get(k) for k in eval_names})
        row.update({f"train/{k}": r.train_metrics.get(k) for k in train_names})
        row.update(wall_time_s=r.wall_time_s, steps=r.steps, error=r.error)
        rows.append(row)
    columns = (
        ["run", "status", *(_column_for(k) for k in keys), "final_reward"]
        + [f"eval/{k}" for k in eval_names]
        + [f"train/{k}" for k in train_names]
        + ["wall_time_s", "steps", "error"]
    )
    frame = pd.DataFrame(rows, columns=columns)
    for col in ["final_reward", "wall_time_s", *(f"eval/{k}" for k in eval_names), *(f"train/{k}" for k in train_names)]:
        frame[col] = pd.to_numeric(frame[col]).astype("float64")
    frame["steps"] = pd.array(frame["steps"].tolist(), dtype="Int64")
    return frame


# ---------------------------------------------------------------- text rendering


def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return MISSING
    if column == "status":
        return _STATUS_MARK.get(str(value), str(value))
    if column == "wall_time_s":
        return f"{float(value):.1f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value).replace("\n", " ").replace("|", "\\|")
    return text or MISSING


def _short(text: str, width: int, middle: bool = False) -> str:
    if len(text) <= width:
        return text
    if middle:  # keep both ends: run names differ at the start or the end of the override list
        head = (width - 1) // 2
        return text[:head] + "…" + text[len(text) - (width - 1 - head):]
    return text[: max(width - 1, 1)] + "…"


def markdown_table(frame: pd.DataFrame, max_width: int | None = None) -> str:
    """A padded Markdown table of ``frame`` (without the ``error`` column).

    With ``max_width``, columns are split into several tables (each repeating ``run``) so every line fits.
    """
    columns = [c for c in frame.columns if c != "error"]
    cells = {c: [_cell(c, v) for v in frame[c].tolist()] for c in columns}
    if max_width is not None:
        cells["run"] = [_short(v, max(max_width // 2, 12), middle=True) for v in cells["run"]]
    widths = {c: max(len(c), *(len(v) for v in cells[c])) if cells[c] else len(c) for c in columns}
    numeric = {c: c not in ("run", "status") and pd.api.types.is_numeric_dtype(frame[c]) for c in columns}

    def render(cols: list[str]) -> str:
        def line(values: list[str]) -> str:
            parts = [v.rjust(widths[c]) if numeric[c] else v.ljust(widths[c]) for c, v in zip(cols, values)]
            return "| " + " | ".join(parts) + " |"

        rule = "|" + "|".join(("-" * (widths[c] + 1) + ":") if numeric[c] else "-" * (widths[c] + 2) for c in cols) + "|"
        body = [line([cells[c][i] for c in cols]) for i in range(len(frame))]
        return "\n".join([line(cols), rule, *body])

    if max_width is None:
        return render(columns)
    chunks: list[list[str]] = []
    current: list[str] = ["run"]
    for c in columns[1:]:
        if current != ["run"] and sum(widths[x] + 3 for x in [*current, c]) + 1 > max_width:
            chunks.append(current)
            current = ["run"]
        current.append(c)
    chunks.append(current)
    return "\n\n".join(render(chunk) for chunk in chunks)


def _first_line(text: str, width: int = 160) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return _short(line, width)


def summary_lines(frame: pd.DataFrame) -> list[str]:
    counts = frame["status"].value_counts()
    parts = [f"{counts[s]} {s}" for s in ("completed", "running", "interrupted", "failed", "crashed", "unfinished")
             if s in counts]
    lines = [f"{len(frame)} run(s): " + ", ".join(parts)]
    for run, status, error in zip(frame["run"], frame["status"], frame["error"]):
        if status in ("failed", "interrupted"):
            lines.append(f"- {run}: {status}: "
                         f"{_first_line(error) if isinstance(error, str) else 'no error recorded'}")
        elif status == "crashed":
            lines.append(f"- {run}: crashed: summary.json says running but its process is gone (killed, or the "
                         "machine went down); resume with trainer.resume_from_checkpoint=latest")
    if "eval/resolution" in frame.columns:
        lines.append("eval/brier_binned = eval/reliability - eval/resolution + eval/uncertainty (Murphy's "
                     "decomposition over ten equal-width bins); eval/auroc 0.5 means the confidence does not rank "
                     "right answers above wrong ones.")
    return lines


# ---------------------------------------------------------------- files


def _legend_label(record: RunRecord, keys: list[str]) -> str:
    if not keys:
        return record.name
    tails = [k.rsplit(".", 1)[-1] for k in keys]
    names = tails if len(set(tails)) == len(tails) else keys
    return ", ".join(f"{n}={record.overrides.get(k, MISSING)}" for n, k in zip(names, keys))


def plot_reward_curves(records: Sequence[RunRecord], out: Path, title: str) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    keys = swept_keys(records)
    fig = Figure(figsize=(9, 5.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plotted = 0
    for record in records:
        if not record.reward_curve:
            continue
        xs, ys = continuous_curve(record.path)  # stages one after another, a resume without zig-zag
        if not xs:
            continue
        style = "-" if record.status == "completed" else "--"
        label = _legend_label(record, keys) + ("" if record.status == "completed" else f" ({record.status})")
        ax.plot(xs, ys, style, marker="." if len(xs) < 30 else None, label=label)
        plotted += 1
    if plotted:
        ax.set_xlabel("step")
        ax.set_ylabel("reward")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small" if plotted <= 8 else "x-small", loc="best")
    else:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no metrics: no run logged a reward", ha="center", va="center", fontsize=14)
    ax.set_title(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def _write_files(root: Path, records: Sequence[RunRecord], frame: pd.DataFrame, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = SweepFiles(out)
    paths = {"csv": files.csv, "md": files.md, "png": files.png}
    frame.to_csv(paths["csv"], index=False)
    plot_reward_curves(records, paths["png"], sweep_title([r.path for r in records], root))
    md = [f"# Run report: `{root}`", "", *summary_lines(frame), "", markdown_table(frame), "",
          f"![reward curves]({paths['png'].name})", ""]
    paths["md"].write_text("\n".join(md), encoding="utf-8")
    return paths


def write_report(root: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write ``report.csv``, ``report.md`` and ``reward_curves.png`` into ``out_dir`` (default: ``root``).

    Returns ``{"csv": ..., "md": ..., "png": ...}``. Raises RunDirError if ``root`` holds no run.
    """
    root = Path(root)
    records = load_runs(root)
    return _write_files(root, records, records_frame(records), Path(out_dir) if out_dir is not None else root)


# ---------------------------------------------------------------- CLI


@dataclass
class ReportArgs(Checked):
    path: str = setting(help="A run directory, or a folder holding run directories (a sweep).")
    out: Optional[str] = setting(None, "The folder report.csv, report.md and reward_curves.png are written to; "
                                 "null: PATH.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.out is not None and Path(self.out).exists() and not Path(self.out).is_dir():
            raise AOCalibError(f"out={self.out} is a file: name a folder to write the report into")


COMMAND = Command(
    "ao_calib.report", ReportArgs, "PATH [out=DIR]",
    "Tabulates run directories (one run or a sweep) into report.csv, report.md and reward_curves.png, and prints "
    "the table: each run's status, the swept keys, its final reward and held-out metrics.",
    examples=("outputs/multiruns/2026-11-22/10-00-00", "path=outputs/multiruns/2026-11-22/10-00-00 out=reports/sweep"),
    positional="path", flags=True)


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv, _report_and_print)


def _report_and_print(args: ReportArgs, _: list[str]) -> int:
    path = Path(args.path)
    records = load_runs(path)
    frame = records_frame(records)
    try:
        paths = _write_files(path, records, frame, Path(args.out) if args.out is not None else path)
    except OSError as exc:  # e.g. out not writable
        print(f"error: cannot write report: {exc}", file=sys.stderr)
        return 1
    width = shutil.get_terminal_size((120, 24)).columns
    lines = [markdown_table(frame, max_width=width), "", *summary_lines(frame), ""]
    lines += [f"wrote {path}" for path in paths.values()]
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown quiet
    return 0


if __name__ == "__main__":
    sys.exit(main())
