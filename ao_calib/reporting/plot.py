"""Training curves of one run, from its ``metrics.jsonl`` (task-agnostic: groups by key name only).

    python -m ao_calib.plot RUN [out=FILE]      # default FILE: RUN/plots/training_curves.png

Every stage (an SFT warm-up, then the trainer) counts its steps from 0, and a resumed run logs again the steps
after its checkpoint. The x axis is therefore one global step: each stage starts where the previous one ended,
and a step logged again replaces what was logged for it before, so a resumed run reads as one line. Each stage is
its own series, validation values are markers, and the run's held-out evaluations (``eval*.json``) are marked at
the end of the stage they followed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ao_calib.core.command_options import Command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import Checked, setting
from ao_calib.runs.records import as_number, read_metrics_counted
from ao_calib.runs.run_dir import RunDir, read_json

_EVAL_PREFIXES = ("eval/", "val/", "eval_")
_EVAL_NOISE = re.compile(r"(runtime|samples_per_second|steps_per_second)$")
TRAIN_STAGE = "train"  # the stage name of the configured trainer in metrics.jsonl; a warm-up is "warmup"


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
EVAL_GROUP = "eval / validation"


# The validation figures drawn first (by the name after ``val/``, ``eval/``, a condition's ``control/`` ...); the
# panel holds at most MAX_EVAL_SERIES, all on a 0-1 scale; every figure stays in metrics.jsonl.
_EVAL_FIRST = ("accuracy", "auroc", "auroc_within_question", "ece", "parse_rate")
MAX_EVAL_SERIES = 8


def shown_eval_keys(keys: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """The validation keys the panel draws: those whose values all lie in [0, 1] (a count such as
    ``distinct_questions`` would flatten the rest), accuracy, AUROC, ECE and parse rate first."""
    def on_unit_scale(key: str) -> bool:
        values = [as_number(row[key]) for row in rows if key in row]
        return all(v is None or 0.0 <= v <= 1.0 for v in values)

    def rank(key: str) -> int:
        name = key.split("/")[-1]
        return _EVAL_FIRST.index(name) if name in _EVAL_FIRST else len(_EVAL_FIRST)

    return sorted((k for k in keys if on_unit_scale(k)), key=rank)[:MAX_EVAL_SERIES]


def group_keys(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{group title: [keys with at least one numeric value]}``, groups without data left out; the validation
    group keeps the keys ``shown_eval_keys`` picks."""
    numeric: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in numeric and key != "step" and as_number(value) is not None:
                numeric.append(key)
    grouped: dict[str, list[str]] = {}
    for key in numeric:
        for title, _, belongs in GROUPS:
            if belongs(key):
                grouped.setdefault(title, []).append(key)
                break
    if EVAL_GROUP in grouped:
        grouped[EVAL_GROUP] = shown_eval_keys(grouped[EVAL_GROUP], rows)
    return {title: grouped[title] for title in _ORDER if grouped.get(title)}


@dataclass
class Stage:
    name: str
    start: float  # global step where the stage begins
    end: float  # global step of its last logged row


def global_steps(rows: list[dict[str, Any]]) -> tuple[list[tuple[float, str, dict[str, Any]]], list[Stage]]:
    """``([(global step, stage, row)], stages in order)``.

    Stages follow one another in the order they first appear. Within a stage, a row whose step is below one
    already seen starts a resumed stretch: the rows it re-logs (that step and later) are dropped from before.
    """
    kept: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for index, row in enumerate(rows):
        stage = str(row.get("stage") or TRAIN_STAGE)
        step = as_number(row.get("step"))
        rows_of_stage = kept.setdefault(stage, [])
        if step is None:
            step = rows_of_stage[-1][0] if rows_of_stage else float(index)
        elif rows_of_stage and step < rows_of_stage[-1][0]:
            rows_of_stage[:] = [(s, r) for s, r in rows_of_stage if s < step]
        rows_of_stage.append((step, row))
    placed: list[tuple[float, str, dict[str, Any]]] = []
    stages: list[Stage] = []
    offset = 0.0
    for stage, stage_rows in kept.items():
        last = max(s for s, _ in stage_rows)
        placed += [(offset + s, stage, r) for s, r in stage_rows]
        stages.append(Stage(stage, offset, offset + last))
        offset += last
    return placed, stages


def stage_series(placed: list[tuple[float, str, dict[str, Any]]], key: str) -> dict[str, tuple[list, list]]:
    """``{stage: (global steps, values)}`` of ``key``, stages without a value left out."""
    out: dict[str, tuple[list, list]] = {}
    for x, stage, row in placed:
        if (y := as_number(row.get(key))) is not None:
            xs, ys = out.setdefault(stage, ([], []))
            xs.append(x)
            ys.append(y)
    return out


def run_title(run: Path) -> str:
    """``task · model · trainer (after a warm-up) · run name`` from the run's config, and the run's folder."""
    from omegaconf import OmegaConf

    config_path = RunDir(run).config
    parts: list[str] = []
    try:
        cfg = OmegaConf.load(config_path)
        name = lambda key: OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)  # noqa: E731
        trainer = name("trainer.name")
        warmup = name("warmup.name")
        parts = [str(p) for p in (name("task.name"), name("model.name"),
                                  f"{warmup} warm-up, then {trainer}" if warmup and trainer else trainer,
                                  name("run_name")) if p]
    except Exception:  # noqa: BLE001 -- a missing or unreadable config only costs the title its names
        parts = []
    folder = "/".join(run.resolve().parts[-3:])
    return " · ".join(parts + [folder]) if parts else folder


def stage_labels(run: Path, stages: list[Stage]) -> dict[str, str]:
    """``{stage: label}``: the stage with the trainer or warm-up it ran, e.g. ``warmup (sft)``, ``train (grpo)``."""
    from omegaconf import OmegaConf

    labels = {s.name: s.name for s in stages}
    try:
        cfg = OmegaConf.load(RunDir(run).config)
    except Exception:  # noqa: BLE001
        return labels
    for stage in stages:
        key = "trainer.name" if stage.name == TRAIN_STAGE else f"{stage.name}.name"
        trainer = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if trainer:
            labels[stage.name] = f"{stage.name} ({trainer})"
    return labels


def held_out_points(run: Path, stages: list[Stage]) -> list[tuple[float, str, float]]:
    """``(global step, label, accuracy)`` of the run's own evaluations: before training, after each stage."""
    ends = {s.name: s.end for s in stages}
    where = {"initial": 0.0, RunDir.FINAL: ends.get(TRAIN_STAGE), **{n: e for n, e in ends.items() if n != TRAIN_STAGE}}
    points = []
    for tag, x in where.items():
        report = read_json(RunDir(run).eval_report(tag))
        if x is None or not report or not isinstance(report.get("metrics"), dict):
            continue
        extra = ((report.get("extra_test") or {}).get("metrics") or {}).get("accuracy")  # e.g. real BFCL cases
        for label, value in (("held-out accuracy", report["metrics"].get("accuracy")),
                             ("held-out control", ((report.get("variants") or {}).get("control") or {}).get("accuracy")),
                             ("extra held-out set accuracy", extra)):
            if (number := as_number(value)) is not None:
                points.append((x, label, number))
    return points


def continuous_curve(run_dir: str | Path, key: str = "reward") -> tuple[list[float], list[float]]:
    """``key`` over the run's global step (the sweep report's curves): stages one after another, resumed stretches
    replacing what they re-log."""
    rows, _ = read_metrics_counted(Path(run_dir))
    placed, _ = global_steps(rows)
    xs: list[float] = []
    ys: list[float] = []
    for stage_xs, stage_ys in stage_series(placed, key).values():
        xs += stage_xs
        ys += stage_ys
    return xs, ys


def sweep_title(run_dirs: Sequence[str | Path], folder: str | Path) -> str:
    """What a sweep's runs share (task, model, trainer), and its folder."""
    titles = {run_title(Path(d)).rsplit(" · ", 1)[0] for d in run_dirs}
    shared = titles.pop() if len(titles) == 1 else "mixed runs"
    return f"reward vs step: {shared} · {Path(folder).resolve().name}"


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
    placed, stages = global_steps(rows)
    labels = stage_labels(run, stages)
    held_out = held_out_points(run, stages)
    if held_out and EVAL_GROUP not in groups:
        groups = {title: groups.get(title, []) for title in _ORDER if title in groups or title == EVAL_GROUP}
    ylabels = {title: ylabel for title, ylabel, _ in GROUPS}
    fig = Figure(figsize=(13, 2.8 * len(groups) + 0.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
    styles = ["-", "--", ":", "-."]
    for ax, (title, keys) in zip(axes, groups.items()):
        entries = 0
        for key in keys:
            per_stage = stage_series(placed, key)
            for index, (stage, (xs, ys)) in enumerate(per_stage.items()):
                label = key if len(per_stage) == 1 and len(stages) == 1 else f"{key} [{labels[stage]}]"
                if title == EVAL_GROUP:  # validation is sparse: markers, one series per key and stage
                    (line,) = ax.plot(xs, ys, linestyle="none", marker="o", markersize=5, label=label)
                else:
                    (line,) = ax.plot(xs, ys, styles[index % len(styles)], marker="o" if len(xs) < 30 else None,
                                      markersize=3, label=label)
                entries += 1
                if key == "reward":
                    _std_band(ax, placed, stage, xs, ys, line.get_color())
        if title == EVAL_GROUP:
            for label in dict.fromkeys(label for _, label, _ in held_out):
                pts = [(x, y) for x, lab, y in held_out if lab == label]
                ax.plot(*zip(*pts), linestyle="none", marker="D" if "accuracy" in label else "s", markersize=7,
                        label=f"{label} (eval*.json)")
                entries += 1
        for stage in stages[1:]:
            ax.axvline(stage.start, color="grey", linestyle=":", linewidth=1)
        for stage in stages:
            if stage.name != TRAIN_STAGE:  # a warm-up's span is shaded, so its end is seen at a glance
                ax.axvspan(stage.start, stage.end, color="grey", alpha=0.07, linewidth=0)
        ax.set_xlim(left=0)
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(ylabels[title])
        ax.grid(True, alpha=0.3)
        if title == "learning rate":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
        if entries > 1 or title == EVAL_GROUP:  # beside the panel: inside it, a long legend hides the curves
            ax.legend(fontsize="small" if entries <= 8 else "x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if len(stages) > 1:
        for stage in stages:
            axes[0].annotate(labels[stage.name], xy=(stage.start, 1.0), xycoords=("data", "axes fraction"),
                             xytext=(3, -12), textcoords="offset points", fontsize="small", color="grey")
    axes[-1].set_xlabel("step" if len(stages) == 1 else "global step (each stage continues where the last ended)")
    note = f" ({skipped} unreadable line(s) skipped)" if skipped else ""
    fig.suptitle(f"{run_title(run)}{note}", fontsize="medium")
    fig.tight_layout()
    target = Path(out) if out is not None else RunDir(run).curves_plot()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    return [target]


def _std_band(ax: Any, placed: list, stage: str, xs: list[float], ys: list[float], color: str) -> None:
    """Shade reward ± reward_std where both were logged on the same row."""
    std = dict(zip(*stage_series(placed, "reward_std").get(stage, ([], []))))
    points = [(x, y, std[x]) for x, y in zip(xs, ys) if x in std]
    if len(points) > 1:
        px, py, ps = zip(*points)
        ax.fill_between(px, [y - s for y, s in zip(py, ps)], [y + s for y, s in zip(py, ps)],
                        color=color, alpha=0.15, linewidth=0, label="reward ± std")


def plot_pooled_reliability(rows: list[dict], out_dir: str | Path, tag: str, ood_datasets=None,
                            method: str = "stated") -> list[Path]:
    """One reliability diagram per pooled group of prediction rows (in- and out-of-distribution datasets,
    ``ao_calib.calibration.per_dataset.grouped``) of ``method``'s confidence on the own-condition rows (the stated
    number, or a baseline's name), drawn as the evaluation draws its own: ``out_dir/reliability_<tag>_<group>.png``
    (``_<method>`` added for a baseline). A group where no own row carries ``method`` gets none."""
    from ao_calib.calibration.metrics import auroc, binarize, expected_calibration_error, plot_reliability_diagram
    from ao_calib.calibration.per_dataset import STATED, grouped, method_scores

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for group, group_rows in grouped(rows, ood_datasets)["pooled"].items():
        confidences, outcomes, _ = method_scores([r for r in group_rows if r["condition"] == "own"], method)
        if not confidences:
            continue
        correct = binarize(outcomes)
        path = out / f"reliability_{tag}_{group}{'' if method == STATED else '_' + method}.png"
        title = (f"{tag} {group.replace('_', ' ')}, {method}: acc {correct.mean():.3f}, "
                 f"AUROC {auroc(confidences, correct):.3f}, ECE {expected_calibration_error(confidences, correct):.3f}"
                 f" (n={len(confidences)})")
        paths.append(plot_reliability_diagram(confidences, outcomes, path, title=title))
    return paths


@dataclass
class PlotArgs(Checked):
    run_dir: str = setting(help="The run directory (holding metrics.jsonl).")
    out: Optional[str] = setting(None, "The image to write (its suffix names the format: .png, .pdf, .svg, ...); "
                                 "null: RUN/plots/training_curves.png.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.out is not None:
            from matplotlib.backend_bases import FigureCanvasBase

            formats = FigureCanvasBase.get_supported_filetypes()
            if Path(self.out).suffix.lstrip(".").lower() not in formats:
                raise AOCalibError(f"out={self.out}: name an image file ending in one of "
                                   f"{', '.join('.' + f for f in sorted(formats))}")


COMMAND = Command(
    "ao_calib.plot", PlotArgs, "RUN [out=FILE]",
    "Plots a run's training curves from its metrics.jsonl: loss, reward, held-out and validation metrics, KL and "
    "learning rate, every stage on one global step axis.",
    examples=("outputs/runs/function_call/2026-11-22/10-00-00",
              "run_dir=outputs/runs/function_call/2026-11-22/10-00-00 out=curves.pdf"),
    positional="run_dir", flags=True)


def main(argv: Sequence[str] | None = None) -> int:
    return COMMAND.main(argv, _plot_and_say)


def _plot_and_say(args: PlotArgs, _: list[str]) -> int:
    run = Path(args.run_dir)
    if not run.is_dir():
        raise AOCalibError(f"run_dir={run}: no such directory")
    metrics = RunDir(run).metrics
    if not metrics.is_file():
        raise AOCalibError(f"run_dir={run}: no {metrics.name} (not a run directory, or the run logged nothing)")
    paths = plot_run(run, args.out)
    if not paths:
        print(f"error: {metrics}: nothing to plot (no numeric loss/reward/eval/kl/lr values)", file=sys.stderr)
        return 1
    for path in paths:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
