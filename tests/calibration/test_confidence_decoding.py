"""eval.confidence_decoding=expected: a greedy evaluation states the number of the scale nearest the mean of the
model's own distribution over it (ao_calib.calibration.decoding), then answers greedily."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList

from ao_calib.calibration.decoding import ExpectedNumber, expected_number_plan
from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.task_api import build_task
from tests.helpers.commands import run_cli

SCALE = [0, 20, 30, 40, 50, 60, 70, 80, 90, 100]


def logits_for(plan: ExpectedNumber, width: int, mass: dict[int, float]) -> torch.Tensor:
    """Logits whose softmax puts ``mass`` on the first tokens of those scale numbers (the rest on others)."""
    logits = torch.full((width,), -30.0)
    for number, share in mass.items():
        logits[plan.first_ids[SCALE.index(number)]] = float(torch.tensor(share).log())
    return logits


def test_the_stated_number_is_the_scale_number_nearest_the_mean_not_the_most_likely(tiny_tokenizer):
    plan = ExpectedNumber(tiny_tokenizer, SCALE)
    assert [tiny_tokenizer.decode([t]) for t in plan.first_ids] == [f" {n}" for n in SCALE]
    assert all(len(plan.tokens[n]) == 1 for n in SCALE)  # " 50" is one token on the tiny tokenizer
    width = len(tiny_tokenizer)
    assert plan.choose(logits_for(plan, width, {50: 0.6, 100: 0.4})) == 70  # the mode would be 50
    assert plan.choose(logits_for(plan, width, {20: 0.5, 100: 0.5})) == 60
    assert plan.choose(logits_for(plan, width, {50: 0.5, 100: 0.5})) == 70  # 75: a tie goes to the lower
    # mass on tokens that begin no scale number is left out: the mean is over the scale alone
    other = logits_for(plan, width, {0: 0.2, 100: 0.2})
    other[tiny_tokenizer.encode(" 45", add_special_tokens=False)[0]] = 5.0
    assert plan.choose(other) == 50


def test_mean_states_the_mean_itself_rounded_to_a_whole_number(tiny_tokenizer, smollm2_tokenizer):
    """``eval.confidence_decoding=mean``: the same mean, not snapped to the scale; every whole number 0-100 is
    written with its own tokens, read back by the tag's parser."""
    from ao_calib.calibration import format_epistemic_status, parse_epistemic_status

    for tokenizer in (tiny_tokenizer, smollm2_tokenizer):
        plan = ExpectedNumber(tokenizer, SCALE, exact=True)
        width = len(tokenizer)
        assert plan.choose(logits_for(plan, width, {50: 0.6, 100: 0.4})) == 70
        assert plan.choose(logits_for(plan, width, {50: 0.5, 100: 0.5})) == 75  # expected would say 70
        assert plan.choose(logits_for(plan, width, {60: 0.7, 70: 0.3})) == 63  # expected would say 60
        assert plan.choose(logits_for(plan, width, {0: 0.993, 100: 0.007})) == 1  # 0.7, to the nearest
        assert plan.choose(logits_for(plan, width, {0: 0.996, 100: 0.004})) == 0
        assert sorted(plan.tokens) == list(range(101))
        for number in (0, 7, 63, 75, 100):  # the number, then the tag's bracket, forced
            assert tokenizer.decode(plan.tokens[number][-1:]) == "]"
            text = tokenizer.decode(plan.prefix + plan.tokens[number]) + " Yes"
            assert parse_epistemic_status(text).confidence == number
            assert text.strip() == format_epistemic_status(number, "Yes").strip()
    assert ExpectedNumber(tiny_tokenizer, SCALE).tokens.keys() == set(SCALE)  # expected: the scale's alone


def test_a_number_of_several_tokens_is_forced_whole_and_rows_without_the_tag_are_left_alone(smollm2_tokenizer):
    """SmolLM2 writes numbers digit by digit: the first digit is chosen by the mean, the others follow it."""
    tokenizer = smollm2_tokenizer
    plan = ExpectedNumber(tokenizer, SCALE)
    digit = {d: tokenizer.encode(d, add_special_tokens=False)[0] for d in "0123456789"}
    assert plan.first_ids == [digit[str(n)[0]] for n in SCALE]
    assert plan.tokens[100] == [digit["1"], digit["0"], digit["0"]] and plan.tokens[50] == [digit["5"], digit["0"]]
    prompt = tokenizer.encode("Is it?", add_special_tokens=False)
    untagged = tokenizer.encode("There is no tag in this answer at all, none whatsoever", add_special_tokens=False)
    rows = [prompt + plan.prefix, prompt + untagged[: len(plan.prefix)]]
    processor = plan.processor(len(prompt), len(rows))
    ids = torch.tensor(rows)
    width = len(tokenizer)
    untouched = torch.randn(width)
    scores = torch.stack([logits_for(plan, width, {100: 0.8, 20: 0.2}), untouched])  # mean 84: 80, mode 100
    forced = []
    for _ in range(2):
        out = processor(ids, scores.clone())
        assert torch.equal(out[1], scores[1])
        assert torch.isinf(out[0]).sum() == width - 1
        forced.append(int(out[0].argmax()))
        ids = torch.cat([ids, torch.tensor([[forced[-1]], [0]])], 1)
        scores = torch.stack([torch.randn(width), untouched])
    assert forced == [digit["8"], digit["0"]]  # "80", then the model's own tokens again
    assert torch.equal(processor(ids, scores.clone()), scores)
    with pytest.raises(AOCalibError, match="eval.confidence_decoding=expected reads a number off its first token"):
        ExpectedNumber(tokenizer, [0, 10, 100])


class ForceTokens(LogitsProcessor):
    """Makes every row open its answer with ``tokens`` (the tag's opening), as a trained oracle would."""

    def __init__(self, prompt_length: int, tokens: list[int]):
        self.prompt_length, self.tokens = prompt_length, tokens

    def __call__(self, input_ids, scores):
        step = input_ids.shape[1] - self.prompt_length
        if step < len(self.tokens):
            scores[:] = -float("inf")
            scores[:, self.tokens[step]] = 0.0
        return scores


def test_generate_states_the_models_mean_number_then_continues_greedily(offline_env, tiny_tokenizer):
    """In transformers' own generate loop, on left-padded rows of different lengths: after the tag's opening each
    row states the scale number nearest the mean of the model's distribution there (computed here by a separate
    forward pass), and the next token is the model's greedy choice after that number."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(ensure_tiny_model(TinyModelSpec(), offline_env / "tiny_models"),
                                                 dtype=torch.float32).eval()
    tokenizer = tiny_tokenizer
    plan = ExpectedNumber(tokenizer, SCALE)
    side, tokenizer.padding_side = tokenizer.padding_side, "left"  # the session's tokenizer: put back below
    batch = tokenizer(["Is the user happy?", "Which city does the text name, and why?", "Hi", "Mood: yes or no?"],
                      return_tensors="pt", padding=True, add_special_tokens=False)
    tokenizer.padding_side = side
    length, n = batch["input_ids"].shape[1], len(plan.prefix)
    out = model.generate(**batch, max_new_tokens=n + 2, do_sample=False, pad_token_id=tokenizer.pad_token_id,
                         logits_processor=LogitsProcessorList([ForceTokens(length, plan.prefix),
                                                               plan.processor(length, len(batch["input_ids"]))]))
    generated = out[:, length:]
    assert (generated[:, :n] == torch.tensor(plan.prefix)).all()
    opened = torch.cat([batch["input_ids"], generated[:, :n]], 1)
    mask = torch.cat([batch["attention_mask"], torch.ones_like(generated[:, :n])], 1)
    with torch.no_grad():
        logits = model(input_ids=opened, attention_mask=mask).logits[:, -1]
    chosen = [plan.tokens[plan.choose(row)][0] for row in logits]
    assert generated[:, n].tolist() == chosen
    modes = [plan.first_ids[int(row[plan.first_ids].argmax())] for row in logits]
    assert chosen != modes  # on these rows the mean and the mode part: greedy alone would state another number
    with torch.no_grad():
        after = model(input_ids=out[:, : length + n + 1],
                      attention_mask=torch.cat([mask, torch.ones_like(generated[:, :1])], 1)).logits[:, -1]
    assert generated[:, n + 1].tolist() == after.argmax(-1).tolist()


def test_refused_at_start_up_by_key_with_a_sampled_evaluation_or_a_task_without_a_scale(tmp_path, tiny_tokenizer):
    for decoding in ("expected", "mean"):  # the quickstart's own is mean
        with pytest.raises(AOCalibError, match=rf"eval.confidence_decoding={decoding} cannot run with "
                                               r"eval.temperature=0.7"):
            compose_run_config(["experiment=quickstart", "eval.temperature=0.7",
                                f"eval.confidence_decoding={decoding}"])
    oracle = build_task(compose_run_config(["experiment=quickstart"]))
    assert expected_number_plan(oracle, tiny_tokenizer, "most_likely") is None
    assert expected_number_plan(oracle, tiny_tokenizer, "expected").first_ids
    assert expected_number_plan(oracle, tiny_tokenizer, "mean").exact
    calls = build_task(compose_run_config(["experiment=function_call_demo"]))
    with pytest.raises(AOCalibError, match="task function_call names no scale"):
        expected_number_plan(calls, tiny_tokenizer, "expected")
    result = run_cli("ao_calib.run", "experiment=function_call_demo", "eval.confidence_decoding=expected",
                     f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2 and "eval.confidence_decoding=expected: task function_call" in result.stderr
