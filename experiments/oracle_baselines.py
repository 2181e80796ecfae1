"""The calibration issue's baselines for an oracle checkpoint that was chosen on the validation split and scored once
on the test split with ``python -m ao_calib.eval`` (a run stopped at a deadline has no final evaluation, so the run
itself wrote no ``baselines.logprob_platt``):

- the oracle's own answer probability, Platt-scaled: fitted on the checkpoint's validation rows (its greedy answers
  there and whether they were right, from the validation predictions file), applied to its test rows;
- a constant: the checkpoint's validation accuracy;
- the text-only rule (leave-one-out hit rate per exact question text) on the test rows;
- a linear probe on the very same activations (the ceiling for reading), fitted on the train split;
- per test row, the own-answer probability raw and Platt-scaled (``rows``), for anyone to recompute the figures.

Everything is computed from the predictions rows the evaluations wrote (the completions are not generated again:
only the answer probabilities of the written completions are read off the model), so the baselines score the same
rows as the oracle::

    python -m experiments.oracle_baselines RUN --adapter RUN/checkpoints/checkpoint-100 --validation-tag step100 \
        --test-tag test_step100 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from experiments.oracle_reading import confidence_figures, probe_accuracy, rows, scored_rows


def _data(cfg, split: str, tokenizer, model):
    """The run's task data with ``split`` as its held-out split (the same seed: the same prompts and rows)."""
    from omegaconf import open_dict

    from ao_calib.task_api import build_task

    with open_dict(cfg):
        cfg.task.data.eval_split = split
    task = build_task(cfg)
    return task.build_data(tokenizer, model)


def baselines(run: Path, adapter: Path, validation_tag: str, test_tag: str) -> dict:
    from ao_calib_tasks.oracle.baselines.probabilities import own_answer_probabilities

    from ao_calib.calibration import metrics as cm
    from ao_calib.calibration.recalibration import PlattScaling
    from ao_calib.config.compose import load_run_config
    from ao_calib.models import loading as models

    cfg = load_run_config(run / "config.yaml")
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_trained_model(cfg.model, source, adapter)
    template = dict(cfg.model.chat_template_kwargs)
    out: dict = {"run": str(run), "adapter": str(adapter), "validation_tag": validation_tag, "test_tag": test_tag}

    fit_records = rows(run, validation_tag)["own"]
    test_records = rows(run, test_tag)["own"]
    validation = _data(cfg, "validation", tokenizer, model)
    fit_rows = scored_rows(validation, fit_records, cfg.eval.seed)
    fit_correct = [float(r["scores"]["correct"]) for r in fit_records]
    fit_p = own_answer_probabilities(model, tokenizer, fit_rows, [r["completion"] for r in fit_records],
                                     validation.steering, chat_template_kwargs=template)
    platt = PlattScaling.fit(fit_p, fit_correct)

    test = _data(cfg, "test", tokenizer, model)
    test_rows = scored_rows(test, test_records, cfg.eval.seed)
    test_p = own_answer_probabilities(model, tokenizer, test_rows, [r["completion"] for r in test_records],
                                      test.steering, chat_template_kwargs=template)
    correct = [float(r["scores"]["correct"]) for r in test_records]
    questions = [r["question"] for r in test_records]
    rule = cm.group_rate_rule(correct, questions)

    out["platt"] = {"a": platt.a, "b": platt.b, "validation_rows": len(fit_rows)}
    for name, conf in (("own-answer probability, Platt on validation", platt(test_p)),
                       ("own-answer probability, raw", test_p),
                       ("constant (validation accuracy)", [float(np.mean(fit_correct))] * len(correct)),
                       ("text-only rule", rule)):
        out[name] = confidence_figures(conf, test_records)
    # the rule is constant within a question text but for its leave-one-out term, which ranks a text's wrong rows
    # above its right ones: its within-question AUROC says nothing, and is left out
    out["text-only rule"]["auroc_q"] = None
    out["probe"] = probe_accuracy(test.steering, test.train.to_list(), test_rows)
    out["rows"] = [{"source_id": r["source_id"], "question": r["question"], "logprob": float(p),
                    "logprob_platt": float(q)} for r, p, q in zip(test_records, test_p, platt(test_p))]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--adapter", type=Path, required=True, help="the checkpoint the two evaluations scored")
    parser.add_argument("--validation-tag", required=True, help="its evaluation on the validation split (the fit)")
    parser.add_argument("--test-tag", required=True, help="its evaluation on the test split (the rows scored)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = baselines(args.run, args.adapter, args.validation_tag, args.test_tag)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
