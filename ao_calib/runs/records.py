"""Reading finished runs back (reports, plots, sweeps): run directories under a folder, their metrics, overrides and
status."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ao_calib.core.errors import AOCalibError
from ao_calib.runs.run_dir import DELETED, RunDir, RunStatus, read_json


class SweepFiles:
    """What ``ao_calib.report`` writes into a sweep folder (or any folder of runs)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.csv, self.md, self.png = self.path / "report.csv", self.path / "report.md", self.path / "reward_curves.png"


class RunDirError(AOCalibError):
    """The given path does not exist or holds no run directory."""


def is_run_dir(path: Path) -> bool:
    return (
        (path / RunDir.HYDRA_CONFIG).is_file()
        or (path / RunDir.SUMMARY).is_file()
        or (path / RunDir.METRICS).is_file()
    )


def find_run_dirs(root: str | Path) -> list[Path]:
    """All run directories at any depth under ``root`` (``root`` itself if it is one), sorted.

    Does not descend into a run directory, into hidden folders, or through symlinks.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    if is_run_dir(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root, followlinks=False):
        keep: list[str] = []
        for name in sorted(dirnames):
            sub = Path(dirpath) / name
            if name.startswith(".") or sub.is_symlink():
                continue
            if is_run_dir(sub):
                found.append(sub)
            else:
                keep.append(name)
        dirnames[:] = keep  # prune: never look inside a run directory
    return sorted(found)


def read_metrics_counted(run_dir: str | Path) -> tuple[list[dict[str, Any]], int]:
    """``(rows, skipped)``: the JSON objects in ``metrics.jsonl`` and how many non-blank lines were unparseable."""
    path = RunDir(run_dir).metrics
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [], 0
    rows: list[dict[str, Any]] = []
    skipped = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            skipped += 1
    return rows, skipped


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (empty if missing); truncated/garbled lines are skipped."""
    return read_metrics_counted(run_dir)[0]


def read_overrides(run_dir: str | Path) -> list[str]:
    """The Hydra overrides of a run, as written in ``.hydra/overrides.yaml`` (empty if missing)."""
    path = RunDir(run_dir).overrides
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(data, list):
        return []
    return [str(item) for item in data if item is not None]


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    """``["+a.b=1", "~c"]`` -> ``{"a.b": "1", "c": "<deleted>"}``. Later overrides win."""
    parsed: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if key.startswith("~"):
            parsed[key.lstrip("~")] = DELETED
            continue
        key = key.lstrip("+")
        if key:
            parsed[key] = value.strip() if sep else ""
    return parsed


def as_number(value: Any) -> float | None:
    """``value`` as a finite float, or None (nulls, bools, strings, NaN/inf are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """``(x, y)`` for ``key`` over ``rows``: x is ``step`` when present, else the row index."""
    xs: list[float] = []
    ys: list[float] = []
    for index, row in enumerate(rows):
        y = as_number(row.get(key))
        if y is None:
            continue
        x = as_number(row.get("step"))
        xs.append(float(index) if x is None else x)
        ys.append(y)
    return xs, ys


@dataclass
class RunRecord:
    path: Path
    name: str
    status: RunStatus
    overrides: dict[str, str] = field(default_factory=dict)
    final_reward: float | None = None
    eval_metrics: dict[str, float] = field(default_factory=dict)
    wall_time_s: float | None = None
    error: str | None = None
    steps: int | None = None
    reward_curve: list[tuple[float, float]] = field(default_factory=list)  # (step, reward)
    skipped_metric_lines: int = 0
    train_metrics: dict[str, float] = field(default_factory=dict)  # last logged value of each REPORTED_TRAIN key


# Step figures the report shows beside the evaluation, by family: the calibration figures, the KL and the
# advantage spread (the per-step list a GRPO run is watched by).
REPORTED_TRAIN_PREFIXES = ("calibration/",)


REPORTED_TRAIN_KEYS = ("kl", "advantage_std")


def last_train_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The last logged value of each reported step figure of the training stage."""
    last: dict[str, float] = {}
    for row in rows:
        if row.get("stage", "train") != "train":
            continue
        for key, value in row.items():
            if (key in REPORTED_TRAIN_KEYS or key.startswith(REPORTED_TRAIN_PREFIXES)) and (
                    number := as_number(value)) is not None:
                last[key] = number
    return last


def _status(summary: dict[str, Any] | None) -> RunStatus:
    if summary is None:  # killed before writing it
        return "unfinished"
    status = summary.get("status")
    if status in ("completed", "failed", "interrupted"):
        return status
    if status == "running":
        alive = process_alive(summary.get("pid"), summary.get("host"))
        return "unfinished" if alive is None else "running" if alive else "crashed"
    return "unfinished"


def process_alive(pid: Any, host: Any) -> bool | None:
    """Whether the run's process still runs: None when that cannot be told from here (no pid recorded, or
    another host). A pid reused by another program does not count (its command line must name ao_calib)."""
    import socket

    if not isinstance(pid, int) or host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and ours cannot be told apart
    proc = Path(f"/proc/{pid}")
    try:
        if proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False  # exited, not yet reaped
        cmdline = proc.joinpath("cmdline").read_bytes()
    except (OSError, IndexError):
        return True  # no /proc here: the pid is alive, and that is all that can be told
    return not cmdline or b"ao_calib" in cmdline  # empty while the process is still starting


def load_run(run_dir: str | Path, name: str | None = None) -> RunRecord:
    """Read everything the report needs from one run directory. ``name`` defaults to the folder name."""
    path = Path(run_dir)
    summary = read_json(RunDir(path).summary)
    rows, skipped = read_metrics_counted(path)
    eval_data = read_json(RunDir(path).eval_report()) or {}
    raw_eval = eval_data.get("metrics")
    eval_metrics = {
        str(key): number
        for key, value in (raw_eval.items() if isinstance(raw_eval, dict) else [])
        if (number := as_number(value)) is not None
    }
    steps_x, rewards = series(rows, "reward")
    last_step = next(
        (int(s) for row in reversed(rows) if (s := as_number(row.get("step"))) is not None), None
    )
    wall_time = as_number((summary or {}).get("wall_time_s"))
    if wall_time is None:  # fall back to the trainer's own timing on the final metrics line
        wall_time = next(
            (t for row in reversed(rows) if (t := as_number(row.get("train_runtime"))) is not None), None
        )
    error = (summary or {}).get("error")
    return RunRecord(
        path=path,
        name=name or path.resolve().name,
        status=_status(summary),
        overrides=parse_overrides(read_overrides(path)),
        final_reward=rewards[-1] if rewards else None,
        eval_metrics=eval_metrics,
        wall_time_s=wall_time,
        error=str(error) if error not in (None, "") else None,
        steps=last_step,
        reward_curve=list(zip(steps_x, rewards)),
        skipped_metric_lines=skipped,
        train_metrics=last_train_metrics(rows),
    )


def load_runs(root: str | Path) -> list[RunRecord]:
    """Every run under ``root``, named by its path relative to ``root``. Raises RunDirError if none."""
    root = Path(root)
    if not root.exists():
        raise RunDirError(f"{root}: no such file or directory")
    if not root.is_dir():
        raise RunDirError(f"{root}: not a directory")
    dirs = find_run_dirs(root)
    if not dirs:
        raise RunDirError(
            f"{root}: no run directory found (looked for {RunDir.HYDRA_CONFIG}, {RunDir.SUMMARY} or {RunDir.METRICS})"
        )
    return [
        load_run(d, name=None if d == root else d.relative_to(root).as_posix()) for d in dirs
    ]
