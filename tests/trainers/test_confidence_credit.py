"""task.calibration.credit=calibration|group|probability: the tokens of the stated number get a group-normalised
calibration term as their advantage, every other token keeps TRL's."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from ao_calib.calibration import CalibrationConfig
from ao_calib.calibration.contract import confidence_span
from ao_calib.calibration.reward import make_calibrated_reward
from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.models import loading as models
from ao_calib.task_api import build_task
from ao_calib.trainers import build_trainer
from ao_calib.trainers.callbacks import MetricsFileCallback
from ao_calib.trainers.credit import (answer_probabilities, answer_probability_targets, answer_token_mask,
                                     calibration_terms, confidence_token_mask, group_normalised)

from tests.helpers.trainers import build_setup


def test_confidence_span_is_the_number_of_a_valid_tag_only():
    text = "  [Epistemic Status: 85] Yes"
    start, end = confidence_span(text)
    assert text[start:end] == "85"
    assert confidence_span("[epistemic status: 101] Yes") is None  # out of range: not parsed, no credit
    assert confidence_span("Yes [epistemic status: 85]") is None  # the tag must open the text


def test_group_normalised_matches_a_hand_computation():
    values = torch.tensor([0.0, -1.0, -0.25, float("nan"), -0.5, -0.5])
    got = group_normalised(values, group_size=3, scale="group")
    first = torch.tensor([0.0, -1.0, -0.25])
    expected = (first - first.mean()) / (first.std() + 1e-4)  # unbiased std, as TRL's nanstd
    assert torch.allclose(got[:3], expected)
    assert got[3] == 0 and torch.allclose(got[4:], torch.zeros(2))  # missing value; a group scored alike
    assert torch.allclose(group_normalised(values, 3, "none")[:3], first - first.mean())
    with pytest.raises(ValueError):
        group_normalised(values, 3, "rank")


def test_the_mask_covers_exactly_the_digits_of_the_tag():
    cfg = compose_run_config(["experiment=oracle_tiny"])
    tokenizer = models.load_tokenizer(models.model_source(cfg.model, cfg.paths.cache_dir))
    texts = ["[epistemic status: 85] Yes", "[epistemic status: 7] No", "Yes", "[epistemic status: 100]No"]
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(map(len, rows)) + 2
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    keep = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    mask = confidence_token_mask(tokenizer, ids, keep)
    for row, text in enumerate(texts):
        chosen = [i for i in range(width) if mask[row, i]]
        span = confidence_span(text)
        if span is None:
            assert not chosen
            continue
        assert chosen == list(range(chosen[0], chosen[-1] + 1))  # one run of tokens
        # the run starts at or before the number and ends at or after it, and no token of it lies wholly outside
        first_start = len(tokenizer.decode(ids[row, : chosen[0]].tolist()))
        last_start = len(tokenizer.decode(ids[row, : chosen[-1]].tolist()))
        first_end = len(tokenizer.decode(ids[row, : chosen[0] + 1].tolist()))
        run_end = len(tokenizer.decode(ids[row, : chosen[-1] + 1].tolist()))
        assert first_start <= span[0] < first_end and last_start < span[1] <= run_end


def test_the_reward_keeps_what_it_scored_each_completion_on():
    rule = CalibrationConfig(lam=0.5, credit="calibration")
    reward = make_calibrated_reward(lambda statuses, completions, **_: [1.0, 0.0, 1.0, None], rule, "calibration")
    scores = reward(["[epistemic status: 90] Yes", "[epistemic status: 90] No", "Yes", "[epistemic status: 50] x"])
    assert reward.rule is rule
    assert reward.scored == [(0.9, 1.0), (0.9, 0.0), (None, 1.0), (0.5, None)]  # untagged: no number; masked
    assert scores[0] == pytest.approx(1 - 0.5 * 0.01) and scores[3] is None


def test_calibration_terms_against_own_answer_and_against_the_rest_of_the_group():
    nan = float("nan")
    confidence = torch.tensor([0.9, 0.5, nan, 0.7, 1.0, 0.6])
    informativeness = torch.tensor([1.0, 0.0, 1.0, nan, 1.0, 1.0])
    own = calibration_terms(confidence, informativeness, 3, "calibration")
    assert torch.allclose(own[:2], torch.tensor([-0.01, -0.25])) and own[2:4].isnan().all()
    group = calibration_terms(confidence, informativeness, 3, "group")
    # first group: the others' mean informativeness is (0 + 1) / 2 for the first, (1 + 1) / 2 for the second
    assert torch.allclose(group[:2], torch.tensor([-(0.9 - 0.5) ** 2, -(0.5 - 1.0) ** 2]))
    assert group[2].isnan()  # untagged: nothing to credit
    # second group: the masked completion still has a number, judged against the two judged others
    assert torch.allclose(group[3:], torch.tensor([-(0.7 - 1.0) ** 2, -(1.0 - 1.0) ** 2, -(0.6 - 1.0) ** 2]))
    lonely = calibration_terms(torch.tensor([0.5, 0.5]), torch.tensor([1.0, nan]), 2, "group")
    assert lonely[0].isnan()  # no other judged completion in its group: no rate to compare with
    with pytest.raises(ValueError):
        calibration_terms(confidence, informativeness, 3, "sequence")


def test_the_groups_chance_from_the_policys_probabilities_by_hand():
    nan = float("nan")
    # group 1: answer 7 twice (P 0.6, 0.8; right), answer 9 once (P 0.3; wrong), one completion without an answer
    # group 2: answer 7 (P 0.9) judged 1 and masked; answer 5 (P 0.5) masked only: seen, but with no score
    # group 3: nothing with both a probability and a judgment
    info = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, nan, nan, 0.5, 1.0, nan, 0.0, 1.0])
    prob = torch.tensor([0.6, 0.8, 0.3, nan, 0.9, 0.7, 0.5, 0.5, nan, 0.4, 0.2, 0.6])
    key = torch.tensor([7, 7, 9, -1, 7, 7, 5, 7, 7, 7, -1, -1])
    got = answer_probability_targets(info, prob, key, 4)
    first = (0.6 + 0.8) / 2 * 1.0 + 0.3 * 0.0
    second = (0.9 + 0.7 + 0.5) / 3 * (1.0 + 0.5) / 2  # the masked 0.7 counts in P, not in the score; 5 unscored
    assert torch.allclose(got[:4], torch.full((4,), first)) and torch.allclose(got[4:8], torch.full((4,), second))
    assert got[8:].isnan().all()
    terms = calibration_terms(torch.tensor([0.9, nan, 0.5, 0.7] * 3), info, 4, "probability", prob, key)
    assert terms[0] == pytest.approx(-(0.9 - first) ** 2) and terms[1].isnan()
    over = answer_probability_targets(torch.ones(2), torch.tensor([0.9, 0.8]), torch.tensor([1, 2]), 2)
    assert torch.equal(over, torch.ones(2))  # two right answers at 0.9 and 0.8 after different tags: clipped to 1
    with pytest.raises(ValueError, match="probability"):
        calibration_terms(torch.ones(2), torch.ones(2), 2, "probability")


def padded(tokenizer, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Completion ids right-padded as TRL pads them, and their completion mask."""
    width = max(map(len, rows)) + 2
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    return ids, torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])


def test_the_answer_mask_covers_what_follows_the_tag_and_the_end_that_closes_it():
    cfg = compose_run_config(["experiment=oracle_tiny"])
    tokenizer = models.load_tokenizer(models.model_source(cfg.model, cfg.paths.cache_dir))
    texts = ["[epistemic status: 85] Yes", "[epistemic status: 7]No", "Yes", "[epistemic status: 90]  ",
             "[epistemic status: 60] Yes"]
    ends = [True, True, True, True, False]  # the last one cut off at the length limit: no end token
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] * end
            for t, end in zip(texts, ends)]
    ids, keep = padded(tokenizer, rows)
    mask = answer_token_mask(tokenizer, ids, keep, end_ids=[tokenizer.eos_token_id])
    for row, answer in enumerate(["Yes", "No", None, None, None]):
        chosen = ids[row][mask[row].bool()].tolist()
        if answer is None:  # no tag, nothing after it, or no end
            assert not chosen
            continue
        assert chosen[-1] == tokenizer.eos_token_id and tokenizer.decode(chosen[:-1]).strip() == answer
        assert not set(chosen) & set(ids[row][confidence_token_mask(tokenizer, ids, keep)[row].bool()].tolist())


def test_an_answer_and_a_longer_one_it_starts_are_disjoint_events():
    """"Yes" and "Yes." after the same tag: each answer's probability is that of the answer ending there, so the
    two add up to at most the probability of writing "Yes" first (and the group's chance stays a lower bound)."""
    cfg = compose_run_config(["experiment=oracle_tiny"])
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer, model = models.load_tokenizer(source), models.load_base_model(cfg.model, source).eval()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Is this about Rome?"}], tokenize=False,
                                           add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    short, long = (tokenizer(f"[epistemic status: 80] {a}", add_special_tokens=False)["input_ids"]
                   for a in ("Yes", "Yes."))
    assert long[:len(short)] == short  # "Yes." is written as "Yes" and then more
    ids, keep = padded(tokenizer, [short + [tokenizer.eos_token_id], long + [tokenizer.eos_token_id]])
    with torch.no_grad():  # the policy's per-token log-probabilities of each completion, as TRL scores them
        logits = model(input_ids=torch.cat([torch.tensor([prompt_ids] * 2), ids], dim=1)).logits
    logps = logits[:, len(prompt_ids) - 1:-1].float().log_softmax(-1).gather(-1, ids[..., None]).squeeze(-1)
    got = answer_probabilities(tokenizer, ids, keep, logps, end_ids=[tokenizer.eos_token_id])
    tag = len(tokenizer("[epistemic status: 80]", add_special_tokens=False)["input_ids"])
    starts_with_yes = logps[0, tag:len(short)].sum().exp()
    assert got[0] + got[1] <= starts_with_yes
    assert torch.allclose(got[0], logps[0, tag:len(short) + 1].sum().exp())  # "Yes" and the end of turn
    # both right: the group's chance of a right answer is at most that of writing "Yes" first
    target = answer_probability_targets(torch.ones(2), got, torch.tensor([1, 2]), 2)
    assert target[0] <= starts_with_yes


def test_bad_credit_rule_is_refused():
    with pytest.raises(ValueError, match="calibration.credit"):
        CalibrationConfig(credit="tokens")


def test_grpo_gives_the_numbers_tokens_their_own_advantage_and_the_rest_trls(tmp_path, monkeypatch):
    """A short SFT warm-up teaches the tiny oracle the tag, then GRPO steps run with credit=group: what TRL's
    loss receives is TRL's advantage on every token but the number's, which carry the calibration term's."""
    import trl

    overrides = ["experiment=oracle_tiny", "task.calibration.credit=group", "warmup.max_steps=30", "warmup.lr=3e-3",
                 "warmup.batch_size=8", "trainer.max_steps=2", "trainer.batch_size=4", "trainer.num_generations=4",
                 "trainer.temperature=1.0"]
    setup, cfg = build_setup(tmp_path, overrides)
    build_trainer(setup, cfg.warmup, "warmup").train()

    seen = []
    trl_loss = trl.GRPOTrainer._compute_loss

    def record(self, model, inputs):
        seen.append({k: inputs[k].detach().clone() for k in ("advantages", "confidence_advantages",
                                                            "confidence_token_mask")})
        return trl_loss(self, model, inputs)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", record)
    trainer = build_trainer(setup, cfg.trainer)
    trainer.train()
    assert seen
    numbers = 0
    for batch in seen:
        advantages, mask = batch["advantages"], batch["confidence_token_mask"].bool()
        assert advantages.dim() == 2 and advantages.shape == mask.shape
        numbers += int(mask.sum())
        for row in range(advantages.size(0)):
            rest = advantages[row][~mask[row]]
            assert torch.all(rest == rest[0])  # one sequence advantage on every other token
            assert torch.all(advantages[row][mask[row]] == batch["confidence_advantages"][row])
    assert numbers > 0  # the warmed-up oracle writes tags, so the rule really applied
    assert math.isfinite(MetricsFileCallback.of(trainer).last["calibration/confidence_advantage_std"])

    # task.calibration.number_only: the same steps give every other token 0, the number's tokens their own term
    seen.clear()
    reward = trainer._credited_reward()
    reward.rule = dataclasses.replace(reward.rule, number_only=True)
    trainer.train()  # two more steps of the same trainer (a second one would add peft's reference adapter again)
    assert seen and sum(int(b["confidence_token_mask"].sum()) for b in seen) > 0
    for batch in seen:
        advantages, mask = batch["advantages"], batch["confidence_token_mask"].bool()
        assert torch.all(advantages[~mask] == 0)
        for row in range(advantages.size(0)):
            assert torch.all(advantages[row][mask[row]] == batch["confidence_advantages"][row])


def test_grpo_credits_the_number_with_its_groups_chance_from_the_policys_probabilities(tmp_path, monkeypatch):
    """credit=probability on real GRPO steps: each completion's answer probability is the policy's (TRL's scoring
    pass, steered), and the number's advantage is the group-normalised −(number − target)² against the group's
    chance computed from those probabilities."""
    import trl

    overrides = ["experiment=oracle_tiny", "task.calibration.credit=probability", "warmup.max_steps=30",
                 "warmup.lr=3e-3", "warmup.batch_size=8", "trainer.max_steps=2", "trainer.batch_size=4",
                 "trainer.num_generations=4", "trainer.temperature=1.0"]
    setup, cfg = build_setup(tmp_path, overrides)
    build_trainer(setup, cfg.warmup, "warmup").train()
    seen, probabilities = [], []
    trl_loss = trl.GRPOTrainer._compute_loss

    def record(self, model, inputs):
        seen.append({k: inputs[k].detach().clone() for k in ("confidence_advantages", "confidence_token_mask")})
        return trl_loss(self, model, inputs)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", record)
    trainer = build_trainer(setup, cfg.trainer)
    own = type(trainer)._answer_probabilities

    def keep(self, output, answers):
        got = own(self, output, answers)
        # recomputed here by a plain forward of the steered policy (temperature 1.0 in this test)
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad(), self.steering.context(self.model, self.steering.batch_for(self._scoring_rows, ids),
                                                    "scoring"):
            logits = self.model(input_ids=ids, attention_mask=mask).logits[:, output["prompt_ids"].size(1) - 1:-1]
        logps = logits.float().log_softmax(-1).gather(-1, output["completion_ids"][..., None]).squeeze(-1)
        in_answer = answer_token_mask(self.processing_class, output["completion_ids"], output["completion_mask"],
                                      self.eos_token_ids)
        expected = (logps * in_answer).sum(1).exp()
        answered = in_answer.any(1)
        assert torch.allclose(got[0][answered], expected[answered], rtol=1e-3, atol=1e-5)
        probabilities.append((output, *got, list(self._credited_reward().scored)))
        return got

    monkeypatch.setattr(type(trainer), "_answer_probabilities", keep)
    trainer.train()
    assert probabilities and seen
    answered = 0
    for output, probability, key, scored in probabilities:
        # the number's advantages: the group-normalised terms against the group's chance from these probabilities
        pairs = torch.tensor([[math.nan if v is None else v for v in pair] for pair in scored])
        terms = calibration_terms(pairs[:, 0], pairs[:, 1], 4, "probability", probability, key)
        assert torch.allclose(output["confidence_advantages"], group_normalised(terms, 4, "batch"))
        texts = trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
        for text, q, k in zip(texts, probability.tolist(), key.tolist()):
            assert (k >= 0) == (not math.isnan(q)) and (math.isnan(q) or 0 < q <= 1)
            answered += k >= 0
        # the same answer text gets the same key
        by_text = {}
        for text, k in zip(texts, key.tolist()):
            if k >= 0:
                by_text.setdefault(text.split("]", 1)[1].strip(), set()).add(k)
        assert all(len(keys) == 1 for keys in by_text.values())
    assert answered > 0  # the warmed-up oracle writes tags and answers, so the rule really applied
    assert math.isfinite(MetricsFileCallback.of(trainer).last["calibration/credit_answer_probability"])


def test_number_only_needs_the_numbers_own_credit():
    assert CalibrationConfig(credit="group", number_only=True).number_only
    with pytest.raises(ValueError, match="number_only=true needs .*credit=calibration, group or probability"):
        CalibrationConfig(credit="sequence", number_only=True)
    with pytest.raises(AOCalibError, match="task.calibration.number_only"):
        build_task(compose_run_config(["experiment=quickstart", "task.calibration.credit=sequence",
                                       "task.calibration.number_only=true"]))


@pytest.mark.parametrize("up, down", [(1, 1), (3, 1)])
def test_the_numbers_credit_pulls_it_to_the_hit_rate_unless_each_group_is_scaled_alone(up, down):
    """Groups whose answers are all right (target 1) and all wrong (target 0), each stating the same spread of
    numbers around c: the net push on the number (sum of advantage x centred number) changes sign at the hit rate
    up / (up + down) under batch and no scaling, as the squared error's gradient does. Each group divided by its own
    std pushes as hard up as down whatever c (hit rate 0.5), and at 0.75 still pushes up from 0.9: a drift towards
    100 that nothing pulls back (task.calibration.credit_scale)."""
    def push(c: float, scale: str) -> float:
        spread = torch.tensor([-0.1, 0.0, 0.1])
        confidence = torch.cat([c + spread] * (up + down))
        informativeness = torch.cat([torch.ones(3)] * up + [torch.zeros(3)] * down)
        advantages = group_normalised(calibration_terms(confidence, informativeness, 3, "calibration"), 3, scale)
        grouped = confidence.view(-1, 3)
        return float((advantages.view(-1, 3) * (grouped - grouped.mean(1, keepdim=True))).sum())

    rate = up / (up + down)
    for scale in ("batch", "none"):
        assert push(rate - 0.15, scale) > 1e-4 and push(rate + 0.15, scale) < -1e-4
        assert abs(push(rate, scale)) < 1e-6
    if up == down:
        assert abs(push(0.2, "group")) < 0.1 * abs(push(0.2, "batch"))  # next to no pull back towards 0.5
    else:
        assert push(0.9, "group") > 0.1  # pushed further up past the hit rate


def test_the_numbers_credit_is_batch_scaled_by_default():
    assert CalibrationConfig().credit_scale == "batch"
    with pytest.raises(ValueError, match="credit_scale"):
        CalibrationConfig(credit_scale="rank")
