"""Run directories: ``RunDir`` names every file a run writes (the one module that spells them), and typed readers
for the report and the plots.

The readers tolerate partial runs: missing files, truncated JSONL lines, null values.
"""

from __future__ import annotations

import json
import logging
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from ao_calib.errors import AOCalibError

# What summary.json says ("running", "completed", "failed", "interrupted"), except that a "running" run whose process
# is gone reads "crashed", and a run that cannot be told (no summary, or no process recorded) reads "unfinished".
RunStatus = Literal["running", "completed", "failed", "interrupted", "crashed", "unfinished"]

log = logging.getLogger(__name__)
DELETED = "<deleted>"  # value shown for a `~key` override


# The warm-up stage's name (ao_calib.config.run_stages uses it): its trainer writes into this subfolder of the run.
WARMUP = "warmup"


class RunDir:
    """One run's directory and the name of everything in it."""

    HYDRA_CONFIG = ".hydra/config.yaml"  # written by Hydra: the composed config, as the YAML files set it
    HYDRA_OVERRIDES = ".hydra/overrides.yaml"
    CONFIG = "config.yaml"  # the full config with every default, written at the start of a run
    METRICS = "metrics.jsonl"
    COMPLETIONS = "completions.jsonl"
    ALERTS = "alerts.jsonl"  # each alert as it fires: step, name, message (kept across a resume)
    SUMMARY = "summary.json"
    ADAPTER = "adapter"
    CHECKPOINTS = "checkpoints"
    CHECKPOINT_PREFIX = "checkpoint-"
    VALUE_HEAD = "value_head.safetensors"  # PPO's critic, beside the adapter in each checkpoint
    PLOTS = "plots"
    FINAL = "final"  # the tag of the end-of-run evaluation

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    @property
    def metrics(self) -> Path:
        return self.path / self.METRICS

    @property
    def completions(self) -> Path:
        return self.path / self.COMPLETIONS

    @property
    def alerts(self) -> Path:
        return self.path / self.ALERTS

    @property
    def summary(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def adapter(self) -> Path:
        return self.path / self.ADAPTER

    @property
    def config(self) -> Path:
        """The full config when the run wrote one, else Hydra's composed one (runs from before it did)."""
        full = self.path / self.CONFIG
        return full if full.is_file() else self.path / self.HYDRA_CONFIG

    @property
    def overrides(self) -> Path:
        return self.path / self.HYDRA_OVERRIDES

    RANK_FAILURE = "failed_rank{rank}.json"  # the error of a process other than the main one (a multi-process run)

    def rank_failure(self, rank: int) -> Path:
        return self.path / self.RANK_FAILURE.format(rank=rank)

    def rank_failures(self) -> dict[int, dict]:
        """{rank: {"error", "host", "pid"}} of the other processes that failed in this run, by rank."""
        found = {}
        for path in self.path.glob(self.RANK_FAILURE.format(rank="*")):
            rank = path.stem.removeprefix("failed_rank")
            if rank.isdigit():
                found[int(rank)] = read_json(path) or {}
        return dict(sorted(found.items()))

    def clear_rank_failures(self) -> None:
        """At the start of a process of the run (a resume starts clean)."""
        for path in self.path.glob(self.RANK_FAILURE.format(rank="*")):
            path.unlink(missing_ok=True)

    # Hydra writes these before the run starts: a directory holding only them is still fresh.
    FRESH = (".hydra",)
    FRESH_SUFFIXES = (".log",)

    def leftovers(self) -> list[str]:
        """What an earlier run left here (anything but Hydra's own files), sorted; empty for a fresh directory."""
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir()
                      if p.name not in self.FRESH and not p.name.endswith(self.FRESH_SUFFIXES))

    def cut_logs(self, step: int | None, stage: str = "train") -> dict[str, int]:
        """Drops what the training stage ``stage`` logged after its ``step`` (None: everything any stage logged),
        so a resumed run appends each step exactly once: ``metrics.jsonl`` rows of later steps (judge counters ride
        in them) and ``completions.jsonl`` samples generated at a later step (a sample's ``step`` counts the
        optimiser steps done when it was generated), and the closing row of the stopped process. A warm-up resumed
        from its own checkpoint also drops whatever the main stage logged (it starts again after the warm-up): its
        rows, samples and alerts (only the main stage samples and raises alerts). Returns the rows dropped per
        file."""
        def keep_metric(row: dict) -> bool:
            if row.get("stage", "train") != stage:
                # an earlier stage's rows stay; the main stage's go when a warm-up is taken up again
                return step is not None and row.get("stage", "train") != "train"
            # The closing row of a stopped process (train_runtime, ...) goes too: the resumed stage writes its own.
            return step is not None and (row.get("step") or 0) <= step and "train_runtime" not in row

        def keep_sample(row: dict) -> bool:
            return step is not None and stage == "train" and (row.get("step") or 0) < step

        def keep_alert(row: dict) -> bool:
            return step is not None and stage == "train" and (row.get("step") or 0) <= step

        return {path.name: _filter_jsonl(path, keep) for path, keep in ((self.metrics, keep_metric),
                                                                       (self.completions, keep_sample),
                                                                       (self.alerts, keep_alert))}

    def fired_alerts(self) -> dict[str, dict]:
        """The first firing of each alert over the whole run, resumes included: ``{name: {step, message}}``."""
        fired: dict[str, dict] = {}
        if self.alerts.is_file():
            for line in self.alerts.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("name") and row["name"] not in fired:
                    fired[row["name"]] = {"step": row.get("step"), "message": row.get("message")}
        return fired

    def stage_dir(self, stage: str) -> Path:
        """Where a stage's trainer writes: the run directory for the main stage, a subfolder for a warm-up."""
        return self.path if stage == "train" else self.path / stage

    def checkpoints(self, stage: str = "train") -> Path:
        return self.stage_dir(stage) / self.CHECKPOINTS

    def checkpoint_dirs(self, stage: str = "train") -> list[Path]:
        """Checkpoints of a stage, oldest first."""
        found = self.checkpoints(stage).glob(self.CHECKPOINT_PREFIX + "*")
        return sorted((p for p in found if p.name[len(self.CHECKPOINT_PREFIX):].isdigit()),
                      key=lambda p: int(p.name[len(self.CHECKPOINT_PREFIX):]))

    @staticmethod
    def _tagged(stem: str, tag: str, variant: str | None, ext: str) -> str:
        return stem + ("" if tag == RunDir.FINAL else f"_{tag}") + (f"_{variant}" if variant else "") + ext

    def selection(self, stage: str = "train") -> Path:
        """``selection.json`` (the main stage's) or ``selection_<stage>.json``: the checkpoint ``eval.select_metric``
        chose and every candidate it was chosen among."""
        return self.path / ("selection.json" if stage == "train" else f"selection_{stage}.json")

    def selection_adapter(self, stage: str, step: int) -> Path:
        """The adapter of a stage's step that was the best evaluated so far, kept until the stage's end."""
        return self.stage_dir(stage) / "selection" / f"step-{step}"

    def eval_report(self, tag: str = FINAL) -> Path:
        """``eval.json`` for the end-of-run evaluation, ``eval_<tag>.json`` for the others."""
        return self.path / self._tagged("eval", tag, None, ".json")

    def predictions(self, tag: str = FINAL, variant: str | None = None) -> Path:
        return self.path / self._tagged("eval_predictions", tag, variant, ".jsonl")

    def reliability_plot(self, tag: str = FINAL) -> Path:
        return self.path / f"reliability_{tag}.png"

    def risk_coverage_plot(self, tag: str = FINAL) -> Path:
        return self.path / f"risk_coverage_{tag}.png"

    def curves_plot(self) -> Path:
        return self.path / self.PLOTS / "training_curves.png"


def _filter_jsonl(path: Path, keep) -> int:
    """Rewrites ``path`` (atomically) with the rows ``keep`` accepts; a torn last line goes too. Returns how many
    lines were dropped."""
    from ao_calib.io import atomic_write_text

    if not path.is_file():
        return 0
    kept: list[str] = []
    dropped = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict) and keep(row):
            kept.append(line)
        elif line.strip():
            dropped += 1
    if dropped:
        atomic_write_text(path, "".join(f"{line}\n" for line in kept))
    return dropped


# ------------------------------------------------------------------------------------------- checkpoints

TRAINER_STATE = "trainer_state.json"


def checkpoint_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a whole checkpoint (missing trainer state, truncated weights or optimizer state), or
    None when it is one. Reads headers only."""
    path = Path(path)
    if not path.is_dir():
        return "no such checkpoint directory"
    try:
        state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
        int(state["global_step"])
    except FileNotFoundError:
        return f"no {TRAINER_STATE} (the save did not finish)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{TRAINER_STATE} is unreadable ({type(exc).__name__})"
    weights = sorted(path.rglob("*.safetensors"))
    if not weights:
        return "no weights file (*.safetensors)"
    from safetensors import safe_open

    for file in weights:
        try:
            with safe_open(str(file), "pt") as f:
                f.keys()
        except Exception as exc:  # noqa: BLE001 -- SafetensorError and OSError alike mean a damaged file
            return f"{file.relative_to(path)} is damaged ({str(exc).splitlines()[0]})"
    for file in path.glob("*.pt"):  # torch.save writes zip archives: a truncated one has no central directory
        if not zipfile.is_zipfile(file):
            return f"{file.name} is damaged (truncated)"
    return None


def checkpoint_step(path: str | Path) -> int:
    return int(json.loads((Path(path) / TRAINER_STATE).read_text(encoding="utf-8"))["global_step"])


def resolve_checkpoint(setting: str | None, run_dir: RunDir) -> str | None:
    """``trainer.resume_from_checkpoint``: null; "latest", the newest whole checkpoint of this run directory (a
    damaged newer one is skipped with a warning naming it); or a path, refused in one message when damaged."""
    if setting is None:
        return None
    if setting != "latest":
        problem = checkpoint_problem(setting)
        if problem:
            raise AOCalibError(f"trainer.resume_from_checkpoint={setting}: {problem}; name another checkpoint or "
                               "use trainer.resume_from_checkpoint=latest (the newest whole one)")
        return str(setting)
    # the main stage's newest, else (a run stopped before the main stage saved one) the warm-up's
    for candidate in [*reversed(run_dir.checkpoint_dirs()), *reversed(run_dir.checkpoint_dirs(WARMUP))]:
        problem = checkpoint_problem(candidate)
        if problem is None:
            log.info("resuming from %s", candidate)
            return str(candidate)
        log.warning("resume_from_checkpoint=latest: skipping %s: %s", candidate, problem)
        print(f"warning: checkpoint {candidate} is damaged ({problem}); falling back to an older one", flush=True)
    log.warning("resume_from_checkpoint=latest: no whole checkpoint in %s, starting from scratch", run_dir)
    return None


def checkpoint_stage(checkpoint: str | Path, run_dir: RunDir) -> str:
    """The stage a checkpoint of this run belongs to: the warm-up's when it lies in its folder, else the main
    stage's ("train")."""
    inside = Path(checkpoint).resolve().parent
    return WARMUP if inside == run_dir.checkpoints(WARMUP).resolve() else "train"


@dataclass
class StartPoint:
    """Where a run starts: from scratch, from a checkpoint (``step``), or nowhere (``finished``: the summary of a
    run that already completed what it is asked to do)."""

    resuming: bool = False
    checkpoint: str | None = None
    step: int | None = None
    finished: dict | None = None
    stage: str = "train"  # the stage the checkpoint (and step) belong to: "warmup" when the main stage saved none


def start_point(setting: str | None, run_dir: RunDir, max_steps: int) -> StartPoint:
    """Decides at start-up, before any model loads: a fresh run (``setting`` null) needs a directory no run has
    written to; a resume takes the checkpoint ``setting`` names (see ``resolve_checkpoint``); resuming a run that
    already completed ``max_steps`` has nothing left to do."""
    if setting is None:
        leftovers = run_dir.leftovers()
        if leftovers:
            shown = ", ".join(leftovers[:5]) + (", ..." if len(leftovers) > 5 else "")
            raise AOCalibError(f"{run_dir} already holds a run ({shown}). Either resume it: add "
                               "trainer.resume_from_checkpoint=latest; or start a fresh run in a new directory: "
                               "leave hydra.run.dir unset (each run gets its own) or name an empty one")
        return StartPoint()
    checkpoint = resolve_checkpoint(setting, run_dir)
    step = checkpoint_step(checkpoint) if checkpoint else None
    stage = checkpoint_stage(checkpoint, run_dir) if checkpoint else "train"
    previous = read_json(run_dir.summary) or {}
    done = as_number((previous.get("final_metrics") or {}).get("step"))
    if previous.get("status") == "completed" and done is not None and done >= max_steps:
        return StartPoint(True, checkpoint, step, finished=previous)
    return StartPoint(True, checkpoint, step, stage=stage)



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


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None if it is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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
