"""The oracle's own answer probability (the baseline its stated confidence must beat), against a plain computation."""

from __future__ import annotations

import pytest
import torch

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status
from ao_calib.judges.label import yes_no

COMPLETIONS = ["[epistemic status: 70] Yes", "[epistemic status: 20] No", "[epistemic status: 100] no.",
               "maybe", "", "[epistemic status: 5] Yes"]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task

    cfg = compose_run_config(["experiment=oracle_tiny", f"paths.cache_dir={tmp_path_factory.mktemp('cache')}"])
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer, model = models.load_tokenizer(source), models.load_base_model(cfg.model, source)
    data = build_task(cfg).build_data(tokenizer, model)
    rows = [data.test[i] for i in range(len(COMPLETIONS))]
    return model.eval(), tokenizer, data.steering, rows, dict(cfg.model.chat_template_kwargs)


def by_hand(model, tokenizer, steering, row, completion, template, answers) -> float:
    """Each answer's full text in a pass of its own: the log-probabilities of its tokens after the tag, summed,
    then normalised over the two answers; the completion's own answer, or the likelier one."""
    status = parse_epistemic_status(completion)
    prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True, **template)
    prefix = len(tokenizer(prompt + format_epistemic_status(status.confidence, "").rstrip(),
                           add_special_tokens=False)["input_ids"])
    scores = []
    for answer in answers:
        ids = torch.tensor([tokenizer(prompt + format_epistemic_status(status.confidence, answer),
                                      add_special_tokens=False)["input_ids"]])
        with torch.no_grad(), steering.context(model, steering.batch_for([row], ids), "test"):
            logprobs = model(input_ids=ids).logits[0].float().log_softmax(-1)
        scores.append(sum(logprobs[t - 1, ids[0, t]] for t in range(prefix, ids.shape[1])))
    p = torch.softmax(torch.stack(scores), dim=0).tolist()
    chosen = {"yes": 0, "no": 1}.get(yes_no(status.answer))
    return p[chosen] if chosen is not None else max(p)


# one token an answer (one pass over the tag, rows batched) and several (both texts scored, a row at a time)
@pytest.mark.parametrize("answers", [("Yes", "No"), ("Yes indeed", "No")])
def test_own_answer_probabilities_are_the_answers_log_probabilities_after_the_tag(oracle, monkeypatch, answers):
    from ao_calib_tasks.oracle.baselines import probabilities as baselines

    model, tokenizer, steering, rows, template = oracle
    monkeypatch.setattr(baselines, "ANSWERS", answers)
    before = steering.stats["baseline_batches"]
    got = baselines.own_answer_probabilities(model, tokenizer, rows, COMPLETIONS, steering,
                                             chat_template_kwargs=template, batch_size=4)
    passes = steering.stats["baseline_batches"] - before
    expected = [by_hand(model, tokenizer, steering, row, c, template, answers) for row, c in zip(rows, COMPLETIONS)]
    assert got == pytest.approx(expected, abs=1e-5)
    assert passes == (2 if answers == ("Yes", "No") else len(rows))  # 6 rows in batches of 4, or one pass a row
