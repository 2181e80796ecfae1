"""Does the tiny oracle learn *when* it knows? Runs ``experiment=quickstart`` (moods stated in three prompts of four,
so that readability varies within one question text: SFT warm-up -> GRPO on the calibration reward -> evaluation)
for several seeds and puts four confidences side by side on the same held-out rows:

(a) the warmed-up oracle's stated confidence, before GRPO;
(b) a constant confidence equal to the oracle's accuracy on a calibration split (fresh prompts from the training
    distribution, used by neither training nor the held-out evaluation);
(c) the classical baseline: the probability the GRPO-trained oracle gives its own yes/no answer, Platt-scaled
    and, separately, temperature-scaled on that calibration split;
(d) the GRPO-trained oracle's stated confidence (SFT + GRPO).

(b), (c) and (d) score the same answers, so they differ only in the confidence.

    python -m experiments.oracle_learning [--seeds 0 1 2] [--calibration-prompts 100] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from ao_calib.core.io import nulls_as_nan
from experiments import seed_runs

COLUMNS = (("accuracy", "acc"), ("control", "control"), ("auroc", "AUROC"), ("ece", "ECE"), ("brier", "Brier"),
           ("reliability", "rel"), ("resolution", "res"), ("confidence_std", "conf std"),
           ("selective_accuracy@50", "sel acc @50%"), ("selective_accuracy@80", "sel acc @80%"))


def train(seed: int, out: Path, overrides: list[str]) -> float | None:
    """Wall seconds of the seed's quickstart run (``seed_runs.train``)."""
    return seed_runs.train(out, ["experiment=quickstart", f"warmup.seed={seed}", f"trainer.seed={seed}",
                                 f"task.data.generate.seed={seed}", *overrides])


def baselines(run: Path, calibration_prompts: int) -> tuple[dict[str, dict], dict]:
    """Every confidence of the docstring on the run's held-out rows, and the headroom of the test bed."""
    from omegaconf import OmegaConf

    from ao_calib.calibration.metrics import calibration_report, kind_headroom
    from ao_calib.calibration.recalibration import PlattScaling, TemperatureScaling
    from ao_calib.config.compose import load_run_config
    from ao_calib.evaluation.generation import generate_completions
    from ao_calib.models import loading as models
    from ao_calib.runs.run_dir import RunDir
    from ao_calib.task_api import build_task, with_run_judge
    from ao_calib_tasks.oracle.baselines.probabilities import fresh_rows, own_answer_probabilities

    run_dir = RunDir(run)
    cfg = load_run_config(run_dir.config)
    task = build_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_trained_model(cfg.model, source, run_dir.adapter)
    data = with_run_judge(task, task.build_data(tokenizer, model), model, tokenizer)
    template = OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True)

    def reports(tag: str) -> dict:
        report = nulls_as_nan(json.loads(run_dir.eval_report(tag).read_text()))  # null: a figure not computable
        return {**report["metrics"], "control": report["variants"]["control"]["accuracy"]}

    records = [json.loads(line) for line in run_dir.predictions().read_text().splitlines()]
    test_rows = data.test.select(range(len(records))).to_list()
    correct = [r["scores"]["correct"] for r in records]

    gen = cfg.task.data.generate
    seen = set(data.train["source_prompt"]) | set(data.test["source_prompt"])
    calib_rows = task.oracle_rows(data, fresh_rows(calibration_prompts, gen.questions_per_prompt, list(gen.kinds),
                                             seed=10_000 + gen.seed, exclude=seen), tokenizer, model)
    calib_completions = generate_completions(model, tokenizer, calib_rows, chat_template_kwargs=template,
                                             max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size,
                                             steering=data.steering, desc="calibration split")
    calib_correct = [s["correct"] for s in task.score(calib_completions, calib_rows, data)]
    calib_p = own_answer_probabilities(model, tokenizer, calib_rows, calib_completions, data.steering,
                                       chat_template_kwargs=template)
    test_p = own_answer_probabilities(model, tokenizer, test_rows, [r["completion"] for r in records],
                                      data.steering, chat_template_kwargs=template)

    final = reports("final")
    control = {"control": final["control"]}
    constant = statistics.fmean(calib_correct)
    table = {
        "(a) warm-up, stated": reports("warmup"),
        "(b) constant = calibration-split accuracy": {**calibration_report([constant] * len(correct), correct),
                                                      **control},
        "(c) own-answer probability, raw": {**calibration_report(test_p, correct), **control},
        "(c) own-answer probability, Platt": {
            **calibration_report(PlattScaling.fit(calib_p, calib_correct)(test_p), correct), **control},
        "(c) own-answer probability, temperature": {
            **calibration_report(TemperatureScaling.fit(calib_p, calib_correct)(test_p), correct), **control},
        "(d) SFT+GRPO, stated": final,
    }
    headroom = kind_headroom(correct, [r["kind"] for r in test_rows])
    return table, headroom


def markdown(results: dict[int, tuple[dict, dict]]) -> list[str]:
    lines = ["| seed | confidence | " + " | ".join(head for _, head in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    names = list(next(iter(results.values()))[0])
    for name in names:
        for seed, (table, _) in results.items():
            m = table[name]
            lines.append(f"| {seed} | {name} | " + " | ".join(f"{m.get(k, float('nan')):.3f}" for k, _ in COLUMNS)
                         + " |")
        mean = {k: statistics.fmean(table[name].get(k, float("nan")) for table, _ in results.values())
                for k, _ in COLUMNS}
        lines.append(f"| **mean** | **{name}** | " + " | ".join(f"{v:.3f}" for v in mean.values()) + " |")
    lines += ["", "| seed | accuracy by kind | best-constant Brier | per-kind Brier | headroom |", "|---|---|---|---|---|"]
    for seed, (_, h) in results.items():
        kinds = ", ".join(f"{k.split('/')[1]} {v:.2f}" for k, v in h.items() if k.startswith("accuracy_kind/"))
        lines.append(f"| {seed} | {kinds} | {h['brier_best_constant']:.3f} | {h['brier_per_kind']:.3f} | "
                     f"{h['headroom']:.3f} |")
    return lines


def main() -> None:
    from bench.report import device_name

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration-prompts", type=int, default=100)
    seed_runs.add_arguments(parser)
    args = parser.parse_args()

    def run_seed(seed: int, out: Path):
        return train(seed, out, args.overrides), baselines(out, args.calibration_prompts)

    lines, walls = seed_runs.each_seed(args.seeds, args.keep, run_seed, markdown)
    wall = f"{statistics.fmean(walls):.0f} s" if walls else seed_runs.NOT_TIMED
    print(f"wall time per run: {wall}")
    seed_runs.write_table(args, "oracle_learning", lines,
                          f"Wall time per `experiment=quickstart` run (SFT, GRPO, two evaluations with controls): "
                          f"{wall} on {device_name()}; overrides: {args.overrides or 'none'}.",
                          "python -m experiments.oracle_learning --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
