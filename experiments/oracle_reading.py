"""Does the oracle read, and does its stated confidence know when it cannot? Trains an oracle preset
(``experiment=oracle_smollm2`` by default; ``--experiment quickstart`` for the tiny one) for several seeds
(``trainer.seed=N`` alone: other prompts, splits and sampling) and scores each run's held-out predictions rows, as
anyone can recompute them from the run directory:

- reading: accuracy under ``own``, ``other`` and ``none`` (the three predictions files), per kind, after the
  warm-up and after GRPO, beside a linear probe on the very same activations (the ceiling for reading: one
  logistic regression per asked value, fitted on the train split's rows);
- calibration after GRPO: AUROC, AUROC within one question text, ECE, confidence std; on ``none`` the mean
  confidence and ECE; the text-only rule (leave-one-out hit rate per question text) and the length rule (the same
  per kind and number of activation vectors); baselines on the same rows:
  the warmed-up oracle's stated confidence, a constant (the oracle's accuracy on the validation split) and the
  oracle's own answer probability Platt-scaled on the validation split (both computed by the run itself,
  ``baselines.logprob_platt``).

    python -m experiments.oracle_reading [--seeds 0 1 2] [--split test|validation] [--keep DIR] [--write BENCHMARKS.md]
        [override ...]

``--split validation`` scores the validation split (choosing settings); ``test`` (default) scores the test split
and fits the baselines on validation.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from experiments import seed_runs

CONDITIONS = (("own", ""), ("other", "_control"), ("none", "_none"))


def train(experiment: str, seed: int, split: str, out: Path, overrides: list[str]) -> float | None:
    """Wall seconds of the seed's run (``seed_runs.train``), its output in ``seed<N>.log`` beside it."""
    return seed_runs.train(out, [f"experiment={experiment}", f"trainer.seed={seed}", f"task.data.eval_split={split}",
                                 *overrides], log=out.parent / f"{out.name}.log")


def rows(run: Path, tag: str) -> dict[str, list[dict]]:
    """The predictions rows of one evaluation, per condition."""
    stem = "eval_predictions" if tag == "final" else f"eval_predictions_{tag}"
    out = {}
    for condition, suffix in CONDITIONS:
        path = run / f"{stem}{suffix}.jsonl"
        if path.is_file():
            out[condition] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def stated(records: list[dict]) -> tuple[list[float], list[float]]:
    from ao_calib.calibration import scored_confidence

    return ([scored_confidence(r["scores"]["confidence"]) for r in records],
            [float(r["scores"]["correct"]) for r in records])


def vector_count(prompt: str) -> int:
    """The number of activation vectors in an oracle prompt: its placeholder tokens (" ?"), on every line but the
    last, which is the question."""
    return sum(line.split().count("?") for line in prompt.split("\n")[:-1])


def figures(by_condition: dict[str, list[dict]]) -> dict[str, float]:
    """Every figure of the acceptance list, from the rows alone."""
    from ao_calib.calibration import metrics as cm

    own = by_condition["own"]
    conf, correct = stated(own)
    questions = [r["question"] for r in own]
    rule = cm.group_rate_rule(correct, questions)
    # a rule that reads only how many vectors the oracle got (one per prompt token with positions=full): the
    # leave-one-out hit rate per kind and count; a bed whose stated facts make longer prompts lets it pass
    lengths = cm.group_rate_rule(correct, [f"{r['kind']}:{vector_count(r['prompt'])}" for r in own])
    out = {"acc": float(np.mean(correct)), "auroc": cm.auroc(conf, correct),
           "auroc_q": cm.within_group_auroc(conf, correct, questions), "text_rule": cm.auroc(rule, correct),
           "length_rule": cm.auroc(lengths, correct),
           "ece": cm.expected_calibration_error(conf, correct), "conf_std": float(np.std(conf)),
           "conf_mean": float(np.mean(conf))}
    for kind in sorted({r["kind"] for r in own}):
        out[f"acc/{kind}"] = float(np.mean([c for c, r in zip(correct, own) if r["kind"] == kind]))
        readable = [c for c, r in zip(correct, own) if r["kind"] == kind and r.get("readable")]
        if readable:
            out[f"acc/{kind}/stated"] = float(np.mean(readable))
    for condition in ("other", "none"):
        if condition in by_condition:
            c_conf, c_correct = stated(by_condition[condition])
            out[f"acc_{condition}"] = float(np.mean(c_correct))
            out[f"conf_{condition}"] = float(np.mean(c_conf))
            out[f"ece_{condition}"] = cm.expected_calibration_error(c_conf, c_correct)
    return out


def probe_accuracy(steering, train_rows: list[dict], test_rows: list[dict]) -> dict[str, float]:
    """A linear probe on the activations the oracle reads (the mean of the injected vectors): one logistic
    regression per asked value (mood: positive or not; topic: each topic), fitted on the train split's rows, and its
    answers to the test rows' questions, scored per kind."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ao_calib_tasks.oracle.rows.generate import asked_fact

    def target(row) -> tuple[str, int] | None:
        asked = asked_fact(row["question"])
        if asked is None or row["answer"] is None:
            return None
        kind, value = asked
        yes = row["answer"].strip().lower() == "yes"
        if kind == "mood":  # one probe: is the prompt's mood positive?
            return "mood", int(yes == (value == "positive"))
        return f"{kind}:{value}", int(yes)

    def features(row) -> np.ndarray:
        return steering.vectors([row])[0].float().mean(0).numpy()

    fitted = {}
    for name in sorted({t[0] for t in map(target, train_rows) if t}):
        pairs = [(features(r), t[1]) for r in train_rows if (t := target(r)) and t[0] == name]
        labels = [y for _, y in pairs]
        if len(set(labels)) == 2:
            fitted[name] = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=5000)).fit(
                np.stack([x for x, _ in pairs]), labels)
    hits: dict[str, list[float]] = {}
    for row in test_rows:
        t = target(row)
        if t is None or t[0] not in fitted:
            continue
        predicted = int(fitted[t[0]].predict(features(row)[None])[0])
        hits.setdefault(row["kind"], []).append(float(predicted == t[1]))
    return {f"probe/{kind}": float(np.mean(v)) for kind, v in sorted(hits.items())}


def baselines(run: Path, split: str) -> dict[str, dict[str, float]]:
    """The linear probe on the run's activations, and (scoring the test split) the constant and the Platt-scaled
    own-answer probability that the run itself fitted on the validation split (``baselines.logprob_platt`` in its
    final predictions rows and eval.json), on the final evaluation's rows."""
    from ao_calib.config.compose import load_run_config
    from ao_calib.models import loading as models
    from ao_calib.runs.run_dir import RunDir
    from ao_calib.task_api import build_task

    run_dir = RunDir(run)
    cfg = load_run_config(run_dir.config)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.load_base_model(cfg.model, source)  # the activations come from the base model (cached)
    task = build_task(cfg)
    data = task.build_data(models.load_tokenizer(source, cfg.model), model)
    records = rows(run, "final")["own"]
    test_rows = scored_rows(data, records, cfg.eval.seed)
    out = {"probe": probe_accuracy(data.steering, data.train.to_list(), test_rows)}
    fitted = json.loads(run_dir.eval_report().read_text()).get("baselines", {}).get("logprob_platt")
    if split != "test" or fitted is None:
        return out
    for name, conf in (("constant (validation accuracy)", [fitted["validation_accuracy"]] * len(records)),
                       ("own-answer probability, Platt on validation",
                        [r["baselines"]["logprob_platt"] for r in records])):
        out[name] = confidence_figures(conf, records)
    return out


def confidence_figures(conf: list[float], records: list[dict]) -> dict[str, float]:
    """AUROC, AUROC within one question text and ECE of a baseline confidence on an evaluation's rows."""
    from ao_calib.calibration import metrics as cm

    correct = [float(r["scores"]["correct"]) for r in records]
    questions = [r["question"] for r in records]
    conf = [float(c) for c in conf]
    return {"auroc": cm.auroc(conf, correct), "ece": cm.expected_calibration_error(conf, correct),
            "auroc_q": cm.within_group_auroc(conf, correct, questions)}


def scored_rows(data, records: list[dict], seed: int) -> list[dict]:
    """The task rows an evaluation's records were scored on: the rows an evaluation of that many rows draws with
    the run's ``eval.seed``, checked against the records' sources and questions
    (``ao_calib.evaluation.evaluate.rows_of_records``)."""
    from ao_calib.evaluation.evaluate import rows_of_records

    held_out = rows_of_records(data.test.to_list(), records, seed, ("source_id", "question"))
    if held_out is None:
        raise SystemExit("the predictions rows are not the rows an evaluation of this split draws")
    return held_out


HEAD = ("acc", "acc_other", "acc_none", "auroc", "auroc_q", "text_rule", "length_rule", "ece", "conf_std",
        "conf_none", "ece_none")


def markdown(results: dict[int, dict]) -> list[str]:
    lines = ["| seed | evaluation | " + " | ".join(HEAD) + " | per kind (own / stated facts only / probe) |",
             "|---|---|" + "---|" * (len(HEAD) + 1)]
    for tag in ("warmup", "final"):
        for seed, result in results.items():
            f = result[tag]
            kinds = "; ".join(
                f"{k}: {f[f'acc/{k}']:.2f} / {f.get(f'acc/{k}/stated', float('nan')):.2f} / "
                f"{result['baselines']['probe'].get(f'probe/{k}', float('nan')):.2f}"
                for k in sorted({key.split('/')[1] for key in f if key.startswith('acc/')}))
            lines.append(f"| {seed} | {tag} | " + " | ".join(f"{f.get(k, float('nan')):.3f}" for k in HEAD)
                         + f" | {kinds} |")
        mean = {k: statistics.fmean(r[tag].get(k, float("nan")) for r in results.values()) for k in HEAD}
        lines.append(f"| **mean** | **{tag}** | " + " | ".join(f"{v:.3f}" for v in mean.values()) + " | |")
    extra = [(seed, name, b) for seed, r in results.items() for name, b in r["baselines"].items() if name != "probe"]
    if extra:
        lines += ["", "| seed | baseline confidence (same rows as final) | AUROC | AUROC within question | ECE |",
                  "|---|---|---|---|---|"]
        lines += [f"| {seed} | {name} | {b['auroc']:.3f} | {b['auroc_q']:.3f} | {b['ece']:.3f} |"
                  for seed, name, b in extra]
    return lines


def main() -> None:
    from bench.report import device_name

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="oracle_smollm2")
    parser.add_argument("--split", choices=("test", "validation"), default="test")
    seed_runs.add_arguments(parser)
    args = parser.parse_args()

    def run_seed(seed: int, out: Path):
        wall = train(args.experiment, seed, args.split, out, args.overrides)
        return wall, {"warmup": figures(rows(out, "warmup")), "final": figures(rows(out, "final")),
                      "baselines": baselines(out, args.split)}

    lines, walls = seed_runs.each_seed(args.seeds, args.keep, run_seed, markdown)
    wall = f"{statistics.fmean(walls) / 60:.1f} min" if walls else seed_runs.NOT_TIMED
    print(f"wall time per run: {wall}")
    seed_runs.write_table(args, f"oracle_reading_{args.experiment}_{args.split}", lines,
                          f"Split scored: {args.split}. Wall time per `experiment={args.experiment}` run: {wall} on "
                          f"{device_name()}; overrides: {args.overrides or 'none'}.",
                          f"python -m experiments.oracle_reading --experiment {args.experiment} --split {args.split} "
                          "--write BENCHMARKS.md")


if __name__ == "__main__":
    main()
