"""A run directory's layout: where each file of a run lives (``RunDir``), and cutting its logs back to a checkpoint on
resume."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

# What summary.json says ("running", "completed", "failed", "interrupted"), except that a "running" run whose process
# is gone reads "crashed", and a run that cannot be told (no summary, or no process recorded) reads "unfinished".
RunStatus = Literal["running", "completed", "failed", "interrupted", "crashed", "unfinished"]


log = logging.getLogger(__name__)


DELETED = "<deleted>"  # value shown for a `~key` override


# The warm-up stage's name (ao_calib.config.checks.run_stages uses it): its trainer writes into this subfolder of the run.
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
    from ao_calib.core.io import atomic_write_text

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


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None if it is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
