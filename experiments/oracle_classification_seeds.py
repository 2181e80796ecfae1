"""The figures of several `experiment=oracle_smollm2_classification` runs (one per seed) side by side, and the
bars the preset is held to, recomputed from each run's final prediction rows (``eval_predictions.jsonl`` and its
``_control`` / ``_none`` files), not read off its eval.json:

    python -m experiments.oracle_classification_seeds RUN_SEED1 RUN_SEED2 RUN_SEED3 [--markdown OUT.md]

Each figure is the mean over the runs, with every run's own value beside it.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ao_calib.calibration.per_dataset import dataset_figures
from ao_calib.runs.run_dir import RunDir
from ao_calib_tasks.oracle.baselines.methods import condition_rows

BASELINES = ("logprob", "logprob_platt", "mode", "warmup", "text_rule")  # the stated number must rank above each


def final_rows(run: Path) -> list[dict]:
    rows = condition_rows(RunDir(run), RunDir.FINAL, ("control", "none"))
    if not rows:
        raise SystemExit(f"{run}: no final prediction rows")
    return rows


def mean(values: list[float]) -> float:
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else float("nan")


def cell(values: list[float | None]) -> str:
    shown = ", ".join("n/a" if v is None or math.isnan(v) else f"{v:.3f}" for v in values)
    return f"{mean(values):.3f} ({shown})" if len(values) > 1 else shown


def groups_of(figures: dict) -> dict[str, dict]:
    return {**figures["datasets"], **{f"pooled {name}": g for name, g in figures["pooled"].items()}}


def tables(per_run: list[dict]) -> str:
    names = list(groups_of(per_run[0]))
    lines = ["| group | n own | acc own | acc none | acc probe | stated conf on none |", "|---|---|---|---|---|---|"]
    for name in names:
        gs = [groups_of(f).get(name) for f in per_run]
        lines.append(f"| {name} | {gs[0]['n'].get('own', 0)} | " + " | ".join(cell([
            g["accuracy"].get(key) if g else None for g in gs]) for key in ("own", "none", "probe")) + " | "
            + cell([g["mean_stated_confidence"].get("none") if g else None for g in gs]) + " |")
    lines += ["", "| group | method | mean conf | AUROC | AUROC within q | ECE | Brier |",
              "|---|---|---|---|---|---|---|"]
    for name in names:
        gs = [groups_of(f).get(name) for f in per_run]
        for method in gs[0]["methods"]:
            ms = [g["methods"].get(method, {}) if g else {} for g in gs]
            lines.append(f"| {name} | {method} | " + " | ".join(cell([m.get(k) for m in ms]) for k in (
                "mean_confidence", "auroc", "auroc_within_question", "ece", "brier")) + " |")
    return "\n".join(lines)


def bars(per_run: list[dict]) -> list[tuple[str, float, str, bool]]:
    """(bar, the figure (mean over runs), the threshold, held)."""
    def figure(path) -> float:
        return mean([path(f) for f in per_run])

    pid = lambda f: f["pooled"]["in_distribution"]  # noqa: E731
    pood = lambda f: f["pooled"]["out_of_distribution"]  # noqa: E731
    out = []
    gap = figure(lambda f: pid(f)["accuracy"]["own"] - pid(f)["accuracy"]["none"])
    out.append(("ID pooled: acc own - acc none", gap, ">= 0.10", gap >= 0.10))
    ood = set(per_run[0]["ood_datasets"])
    for name in per_run[0]["datasets"]:
        if name in ood:
            continue
        probe = figure(lambda f: f["datasets"][name]["accuracy"].get("probe", float("nan")))
        own = figure(lambda f: f["datasets"][name]["accuracy"]["own"])
        out.append((f"{name}: probe accuracy", probe, ">= 0.80", probe >= 0.80))
        out.append((f"{name}: |acc own - acc probe|", abs(own - probe), "<= 0.10", abs(own - probe) <= 0.10))
        n = per_run[0]["datasets"][name]["n"].get("own", 0)
        gap = figure(lambda f: f["datasets"][name]["methods"]["stated"]["mean_confidence"]
                     - f["datasets"][name]["accuracy"]["own"])
        out.append((f"{name} ({n} rows): |mean conf - acc own|", abs(gap), "<= 0.08" + (
            "" if n >= 100 else " (bar for >= 100 rows only)"), abs(gap) <= 0.08))
    stated = lambda g, key: figure(lambda f: g(f)["methods"]["stated"][key])  # noqa: E731
    ece, auc = stated(pid, "ece"), stated(pid, "auroc")
    out.append(("ID pooled: ECE", ece, "<= 0.05", ece <= 0.05))
    for base in BASELINES:
        other = figure(lambda f: pid(f)["methods"].get(base, {}).get("auroc", float("nan")))
        out.append((f"ID pooled: AUROC - {base} AUROC", auc - other, ">= 0", auc - other >= 0))
    mode_ece = figure(lambda f: pid(f)["methods"].get("mode", {}).get("ece", float("nan")))
    out.append(("ID pooled: ECE - mode ECE", ece - mode_ece, "< 0", ece - mode_ece < 0))
    if per_run[0]["pooled"].get("out_of_distribution"):
        ece, auc = stated(pood, "ece"), stated(pood, "auroc")
        platt = figure(lambda f: pood(f)["methods"].get("logprob_platt", {}).get("auroc", float("nan")))
        none = figure(lambda f: pood(f)["mean_stated_confidence"].get("none", float("nan")))
        out += [("OOD pooled: ECE", ece, "<= 0.10", ece <= 0.10),
                ("OOD pooled: AUROC - logprob_platt AUROC", auc - platt, ">= 0", auc - platt >= 0),
                ("OOD pooled: stated confidence on none", none, "<= 0.65", none <= 0.65)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args()
    per_run = [dataset_figures(final_rows(run)) for run in args.runs]
    text = tables(per_run) + "\n\n| bar | figure (mean) | needs | held |\n|---|---|---|---|\n" + "\n".join(
        f"| {name} | {value:+.3f} | {need} | {'yes' if held else '**no**'} |"
        for name, value, need, held in bars(per_run))
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")


if __name__ == "__main__":
    main()
