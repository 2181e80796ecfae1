"""The Platt-scaled own-answer probability (``baselines.logprob_platt``): fitted on the validation split's rows and
written into every own-condition predictions row, against scikit-learn's logistic regression on the same rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from ao_calib.config.compose import compose_run_config
from ao_calib.evaluation.evaluate import evaluate
from ao_calib.judges.label import yes_no
from ao_calib.models import loading as models
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import build_task, with_run_judge
from ao_calib_tasks.oracle.baselines.probabilities import own_answer_probabilities


def logit(p) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return np.log(p / (1 - p))


def test_the_platt_baseline_is_a_logistic_fit_on_the_validation_rows_applied_to_every_scored_row(tmp_path):
    cfg = compose_run_config(["experiment=oracle_tiny", "task.data.generate.n_validation_prompts=8",
                              "task.baselines_logprob_platt=false"])  # the evaluation below leaves it to this test
    task = build_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer, model = models.load_tokenizer(source), models.load_base_model(cfg.model, source).eval()
    data = with_run_judge(task, task.build_data(tokenizer, model), model, tokenizer)
    template = dict(cfg.model.chat_template_kwargs)
    run_dir = RunDir(tmp_path)
    evaluate(task, model, tokenizer, data, num_samples=cfg.eval.num_samples, batch_size=8, max_new_tokens=12,
             chat_template_kwargs=template, run_dir=run_dir, tag=RunDir.FINAL, seed=task.context.eval_seed,
             merged_copy=False, confidence_decoding=cfg.eval.confidence_decoding)  # the own-condition predictions file

    # The validation answers: the label on every other row, its opposite on the rest (the random tiny model writes
    # no yes/no of its own), so that both outcomes occur; the probabilities are still the model's own.
    asked = {}

    def answer_validation(rows, desc=""):
        flip = {"Yes": "No", "No": "Yes"}
        asked["rows"] = rows
        asked["completions"] = [f"[epistemic status: {50 + 10 * (i % 5)}] "
                                f"{r['answer'] if i % 2 == 0 else flip[r['answer']]}" for i, r in enumerate(rows)]
        return asked["completions"]

    out = task.baselines(data).logprob_platt(model, tokenizer, answer_validation, run_dir, RunDir.FINAL)
    validation, completions = asked["rows"], asked["completions"]
    fitted = min(16, cfg.eval.num_samples)  # the fit takes as many validation rows as the evaluation scored, or all
    assert len(validation) == fitted
    assert {r["source_id"] for r in validation}.isdisjoint(r["source_id"] for r in data.test)
    correct = [float(yes_no(c.split("] ")[1]) == yes_no(r["answer"])) for r, c in zip(validation, completions)]
    x = logit(own_answer_probabilities(model, tokenizer, validation, completions, data.steering,
                                       chat_template_kwargs=template))
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(x[:, None], correct)
    report = out["baselines"]["logprob_platt"]
    assert report["validation_rows"] == fitted and report["validation_accuracy"] == pytest.approx(np.mean(correct))
    assert report["platt"]["a"] == pytest.approx(reference.coef_[0, 0], rel=1e-4, abs=1e-6)
    assert report["platt"]["b"] == pytest.approx(reference.intercept_[0], rel=1e-4, abs=1e-6)

    records = [json.loads(line) for line in run_dir.predictions(RunDir.FINAL).read_text().splitlines()]
    assert len(records) == cfg.eval.num_samples
    by_key = {(r["source_id"], r["question"]): r for r in data.test}
    rows = [by_key[(r["source_id"], r["question"])] for r in records]
    own = own_answer_probabilities(model, tokenizer, rows, [r["completion"] for r in records], data.steering,
                                   chat_template_kwargs=template)
    assert [r["baselines"]["logprob"] for r in records] == pytest.approx(own, abs=1e-6)
    expected = reference.predict_proba(logit(own)[:, None])[:, 1]
    assert [r["baselines"]["logprob_platt"] for r in records] == pytest.approx(expected.tolist(), abs=1e-5)
