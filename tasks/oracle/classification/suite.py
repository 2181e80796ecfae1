"""The classification suite (``task.classification``) scored beside an evaluation: each dataset's rows asked of
the oracle (and under the control), its accuracy and calibration, a predictions file and a printed table."""

from __future__ import annotations

import logging

from ao_calib.calibration import scored_confidence
from ao_calib.calibration.metrics import calibration_report
from ao_calib.core.io import write_jsonl
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed

from ..build import OracleBuild
from .datasets import load_suite
from ..config import ClassificationEvalConfig

log = logging.getLogger(__name__)


def classification_suite(settings: ClassificationEvalConfig, built: OracleBuild, with_control: bool, model,
                         tokenizer, generate, score, run_dir: RunDir, tag: str) -> dict:
    """The suite's figures per dataset and overall (``score(completions, rows)`` scores), with the control's
    accuracy when ``with_control`` and every row has a control prompt."""
    suite, skipped = load_suite(list(settings.datasets), settings.data_dir, settings.n_per_dataset, settings.seed)
    for name, reason in skipped.items():
        log.warning("classification eval: %s skipped: %s", name, reason)
    results, pooled, records = {}, [], []
    for name, rows in suite.items():
        oracle_rows = built.more_rows(rows, model, tokenizer, seed=settings.seed)
        completions = generate(oracle_rows, desc=f"{tag}/{name}")
        scores = score(completions, oracle_rows)
        controls = [None] * len(oracle_rows)
        if with_control and all(r["control_activation_id"] for r in oracle_rows):
            controls = generate(oracle_rows, condition="other", desc=f"{tag}/{name}_control")
        pooled += scores
        results[name] = calibration_of(scores)
        if controls[0] is not None:
            results[name]["control_accuracy"] = sum(
                s["correct"] for s in score(controls, oracle_rows)) / len(oracle_rows)
        records += [{"dataset": name, "question": r["question"], "expected": r["answer"],
                     "source_layer": r["source_layer"], "activation_id": r["activation_id"],
                     "control_activation_id": r["control_activation_id"], "completion": c, "scores": sc,
                     "control_completion": cc} for r, c, sc, cc in zip(oracle_rows, completions, scores, controls)]
    if pooled:
        results["overall"] = calibration_of(pooled)
    if distributed.is_main():
        predictions = run_dir.predictions(tag, "classification")
        write_jsonl(predictions, records)
        print_table(tag, results, skipped)
    return {"classification": results, "classification_skipped": skipped}


def calibration_of(scores: list[dict]) -> dict[str, float]:
    metrics = calibration_report([scored_confidence(s["confidence"]) for s in scores], [s["correct"] for s in scores])
    return {**metrics, "parse_rate": sum(s["parsed"] for s in scores) / len(scores), "n": len(scores)}


def print_table(tag: str, results: dict, skipped: dict) -> None:
    lines = [f"[eval:{tag}] classification suite",
             f"  {'dataset':<18}{'n':>6}{'acc':>8}{'control':>9}{'AUROC':>8}{'ECE':>8}{'MCE':>8}{'Brier':>8}"]
    for name, m in results.items():
        control = f"{m['control_accuracy']:>9.3f}" if "control_accuracy" in m else f"{'-':>9}"
        lines.append(f"  {name:<18}{m['n']:>6}{m['accuracy']:>8.3f}{control}{m['auroc']:>8.3f}{m['ece']:>8.3f}"
                     f"{m['mce']:>8.3f}{m['brier']:>8.3f}")
    lines += [f"  {name:<18} skipped: {reason}" for name, reason in skipped.items()]
    print("\n".join(lines), flush=True)
