"""Checkpoint selection (``eval.select_metric``): a stage's final adapter is the one of its evaluated steps with the
best figure on the validation split, as transformers' ``load_best_model_at_end`` keeps its best checkpoint.

Every evaluation during a stage, and one at its end, offers a candidate. The adapter of each step that is the best
so far is saved under ``<stage dir>/selection/step-N``; at the stage's end the chosen one is loaded into the model
and the others are deleted (the chosen one stays: a run trained further from its last checkpoint may choose it
again). ``selection.json`` (``selection_<stage>.json``) records every candidate and the choice;
it is rewritten after each candidate, so that a resumed run takes it up (the candidates after the step it resumes
from go: their evaluations run again)."""

from __future__ import annotations

import copy
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import write_json
from ao_calib.runs.records import as_number
from ao_calib.runs.run_dir import RunDir, read_json
from ao_calib.runtime import distributed

log = logging.getLogger(__name__)

# Figures where lower is better (select_mode=auto), matched against a name's last part: as itself, or as its
# first or last word (ece_equal_mass, text_rule_ece, brier_binned).
LOWER_IS_BETTER = ("ece", "mce", "brier", "aurc", "loss", "nll", "error", "kl")


def lower_is_better(metric: str, mode) -> bool:
    """Whether ``eval.select_metric`` is minimised: ``mode`` min or max says so; auto reads it off the name."""
    mode = str(getattr(mode, "value", mode))
    if mode != "auto":
        return mode == "min"
    leaf = metric.rsplit("/", 1)[-1]
    return any(leaf == word or leaf.startswith(word + "_") or leaf.endswith("_" + word) for word in LOWER_IS_BETTER)


def check_metric_name(metric: str, task) -> None:
    """Refuses, before the model loads, a metric the task's evaluation does not report, listing those it does."""
    names = task.metric_names()
    if metric not in names:
        raise AOCalibError(f"eval.select_metric={metric}: task={task.name}'s evaluation reports no such figure; "
                           f"it reports: {', '.join(sorted(names))}")


def on_split(cfg, split: str):
    """A copy of the run's config whose task scores ``split`` (``task.data.eval_split``): the final evaluation's
    task under selection, which scores the test split while the evaluations during training score validation."""
    from omegaconf import open_dict

    other = copy.deepcopy(cfg)
    with open_dict(other):
        other.task.data.eval_split = split
    return other


class StageSelection:
    """The candidates of one stage (``train``, or the warm-up's name) and the choice among them."""

    def __init__(self, run_dir: RunDir, stage: str, metric: str, mode):
        self.run_dir, self.stage, self.metric = run_dir, stage, metric
        self.minimise = lower_is_better(metric, mode)
        self.candidates: list[dict] = []

    @property
    def path(self) -> Path:
        return self.run_dir.selection(self.stage)

    def _settings(self) -> dict:
        return {"stage": self.stage, "metric": self.metric, "mode": "min" if self.minimise else "max"}

    def take_up(self, through_step: int | None) -> None:
        """The stage starts: afresh (``through_step`` None: an earlier attempt's candidates and adapters go), or
        resumed from its checkpoint of ``through_step`` (the candidates up to it stay). The main process reads and
        prunes; every process gets its candidates."""
        self.candidates = distributed.on_main(lambda: self._take_up_on_main(through_step))

    def _take_up_on_main(self, through_step: int | None) -> list[dict]:
        previous = (read_json(self.path) or {}) if through_step is not None else {}
        if previous and {k: previous.get(k) for k in ("metric", "mode")} != {
                k: v for k, v in self._settings().items() if k != "stage"}:
            raise AOCalibError(f"eval.select_metric={self.metric}: this run chose its {self.stage} checkpoint by "
                               f"{previous.get('metric')} ({previous.get('mode')}) before it was stopped; resume it "
                               "with the same eval.select_metric and eval.select_mode")
        self.candidates = [c for c in previous.get("candidates") or [] if c.get("step", 0) <= through_step]
        kept = {f"step-{c['step']}" for c in self.candidates}
        for folder in self._adapter_folders():
            if folder.name not in kept:  # a later step's (evaluated again), or a save a kill cut short (.partial)
                shutil.rmtree(folder, ignore_errors=True)
        self._write()
        return self.candidates

    def has(self, step: int) -> bool:
        return any(c["step"] == step for c in self.candidates)

    def value_of(self, metrics: dict) -> float | None:
        """The metric of an evaluation; None when it is NaN or no number (such a candidate never wins)."""
        if self.metric not in metrics:
            numbers = sorted(k for k, v in metrics.items() if isinstance(v, (int, float)))
            raise AOCalibError(f"eval.select_metric={self.metric}: the evaluation reported no such figure; it "
                               f"reported: {', '.join(numbers)}")
        return as_number(metrics[self.metric])

    def best(self) -> dict | None:
        """The candidate with the best number; ties go to the earliest step. None when none has a number."""
        numbered = [c for c in self.candidates if c["value"] is not None]
        if not numbered:
            return None
        return min(numbered, key=lambda c: (c["value"] if self.minimise else -c["value"], c["step"]))

    def offer(self, step: int, tag: str, metrics: dict, save_adapter: Callable[[Path], None] | None = None) -> None:
        """One evaluation of the stage at ``step``; ``save_adapter(path)`` (every process calls it) saves the
        model's adapter there, when this step is the best so far."""
        if self.has(step):
            return
        # a warm-up's evaluations are tagged with its name (warmup_step4), as their reports are
        prefix = "" if self.stage == "train" else f"{self.stage}_"
        candidate = {"step": step, "tag": prefix + tag, "value": self.value_of(metrics)}
        self.candidates.append(candidate)
        if save_adapter is not None and self.best() is candidate:
            target = self.run_dir.selection_adapter(self.stage, step)
            partial = target.with_name(target.name + ".partial")  # a kill during the save leaves no torn adapter
            save_adapter(partial)
            distributed.on_main(lambda: self._publish(partial, target))
        else:
            distributed.on_main(self._write)
        shown = "NaN" if candidate["value"] is None else f"{candidate['value']:.4g}"
        log.info("selection (%s): step %d %s = %s", self.stage, step, self.metric, shown)

    def choose(self, last_step: int) -> dict:
        """The stage's end: the chosen candidate (the last step when no candidate has a number), written down with
        every candidate; the adapters of the others are deleted. Returns the record, with ``adapter``: the folder
        to load, or None when the chosen step is the last (the model holds it)."""
        best = self.best()
        chosen = best or next((c for c in self.candidates if c["step"] == last_step),
                              {"step": last_step, "tag": None, "value": None})
        kept = self.run_dir.selection_adapter(self.stage, chosen["step"])
        adapter = None if chosen["step"] == last_step else kept
        record = {**self._settings(), "selected": {**chosen, "reason": "best value" if best else
                                                   "no candidate had a number: the last step"},
                  "candidates": self.candidates}
        distributed.on_main(lambda: self._record_choice(record, kept, adapter))
        return {**record, "adapter": str(adapter) if adapter else None}

    def _record_choice(self, record: dict, kept: Path, adapter: Path | None) -> None:
        if adapter is not None and not adapter.is_dir():
            raise AOCalibError(f"eval.select_metric={self.metric}: the adapter of the chosen step "
                               f"{record['selected']['step']} is missing ({adapter}); the run directory was changed "
                               "since it was saved")
        for folder in self._adapter_folders():
            if folder != kept:
                shutil.rmtree(folder, ignore_errors=True)
        write_json(self.path, record)

    def _publish(self, partial: Path, target: Path) -> None:
        """The main process, once every process's save returned: the adapter under its name, then the record."""
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        self._write()

    def _adapter_folders(self) -> list[Path]:
        return list(self.run_dir.selection_adapter(self.stage, 0).parent.glob("step-*"))

    def _write(self) -> None:
        write_json(self.path, {**self._settings(), "selected": None, "candidates": self.candidates})


def selection_lines(selections: dict[str, dict]) -> list[str]:
    """The closing block's lines: each stage's chosen step and the candidates it was chosen among."""
    lines = []
    for stage, record in selections.items():
        chosen = record["selected"]
        values = ", ".join(f"{c['step']}: {'NaN' if c['value'] is None else format(c['value'], '.4g')}"
                           for c in record["candidates"])
        shown = "NaN" if chosen["value"] is None else f"{chosen['value']:.4g}"
        lines.append(f" selected ({stage}): step {chosen['step']}, {record['metric']} ({record['mode']}) = {shown} "
                     f"on validation; candidates {values}")
    return lines
