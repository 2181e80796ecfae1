"""warmup.confidence_loss=calibration: beside the drawn number's cross-entropy, the tag's first token is trained by the
calibration penalty in expectation over its own distribution, against the model's probability of the target answer
(ao_calib.trainers.calibration_loss)."""

from __future__ import annotations

import math

import datasets
import pytest
import torch

from ao_calib.calibration.contract import first_digit_values, number_tokens
from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.trainers import calibration_loss
from ao_calib.trainers.config import ConfidenceLoss, SFTTrainerConfig
from ao_calib.trainers.sft import tokenize_pairs

NUMBERS = [0, 20, 30, 40, 50, 60, 70, 80, 90, 100]


def test_each_first_digit_stands_for_one_number():
    assert first_digit_values(NUMBERS) == {0: 0, 2: 20, 3: 30, 4: 40, 5: 50, 6: 60, 7: 70, 8: 80, 9: 90, 1: 100}
    assert first_digit_values([50, 60, 100]) == {5: 50, 6: 60, 1: 100}
    with pytest.raises(ValueError, match="10 and 100 both begin with the digit 1"):
        first_digit_values([0, 10, 100])
    with pytest.raises(ValueError, match="not a confidence"):
        first_digit_values([120])


def test_the_expected_penalty_is_the_hand_computed_sum():
    logits = torch.log(torch.tensor([[0.5, 0.2, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0]]) + 1e-12)
    values = {0: 0, 1: 100, 5: 50}  # digits 2-4 and 6-9 begin no number: penalty 1
    c = torch.tensor([0.9])
    hand = 0.5 * (0 - 0.9) ** 2 + 0.2 * (1.0 - 0.9) ** 2 + 0.3 * (0.5 - 0.9) ** 2
    assert calibration_loss.expected_penalty(logits, values, c).item() == pytest.approx(hand, abs=1e-6)
    assert calibration_loss.expected_number(logits, values).item() == pytest.approx(0.2 + 0.15, abs=1e-6)
    uniform = torch.zeros(1, 10)
    assert calibration_loss.expected_penalty(uniform, values, c).item() == pytest.approx(
        (0.81 + 0.01 + 0.16 + 7) / 10, abs=1e-6)


def test_numbers_sharing_a_first_digit_are_refused_at_start_up_by_key():
    from ao_calib.config.checks import check_confidence_loss

    base = ["experiment=oracle_smollm2", "warmup.confidence_loss=calibration"]
    check_confidence_loss(compose_run_config(base))  # the preset's numbers (0, 20, 30, ..., 100): distinct first digits
    with pytest.raises(AOCalibError, match=r"task.warmup_rows.confidences=\[0, 10, 100\] cannot run with "
                                           r"warmup.confidence_loss=calibration: 10 and 100"):
        check_confidence_loss(compose_run_config([*base, "task.warmup_rows.confidences=[0,10,100]"]))
    check_confidence_loss(compose_run_config(["experiment=oracle_smollm2", "warmup.confidence_loss=cross_entropy",
                                              "task.warmup_rows.confidences=[0,10,100]"]))
    with pytest.raises(ValueError, match="confidence_loss=calibration: out of range with confidence_in_loss=false"):
        SFTTrainerConfig(confidence_loss=ConfidenceLoss.calibration, confidence_in_loss=False)
    with pytest.raises(ValueError, match="calibration_expected_over_draw=true: out of range with "
                                         "confidence_loss=cross_entropy"):
        SFTTrainerConfig(calibration_expected_over_draw=True)


def rows(*completions, answer_in_loss=True, drawn_from=()):
    return datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": "Is the user happy?"}],
                                        "completion": text, "answer_in_loss": answer_in_loss,
                                        "answer_drawn_from": list(drawn_from)}
                                       for text in completions])


def test_a_tokenizer_that_writes_a_number_as_one_token_reads_it_off_that_token(tiny_tokenizer):
    """The tiny model's tokenizer writes " 50" whole: each target number is its own first token, the row records
    where that token is, and a row whose number begins otherwise (no space) is refused, naming the row."""
    numbers = number_tokens(tiny_tokenizer, set(NUMBERS))
    by_number = {n: numbers.ids[i] for i, n in numbers.values.items()}
    assert sorted(by_number) == NUMBERS and len(set(by_number.values())) == len(NUMBERS)
    assert tiny_tokenizer.decode([by_number[50]]) == " 50" and numbers.prefix == "[epistemic status:"
    encoded = tokenize_pairs(rows("[epistemic status: 50] Yes"), tiny_tokenizer, {"enable_thinking": False}, 512,
                             confidence_loss="calibration", number_ids=numbers.ids)[0]
    assert encoded["input_ids"][encoded["confidence_index"]] == by_number[50]
    with pytest.raises(AOCalibError, match="row 1 writes it as"):
        tokenize_pairs(rows("[epistemic status: 50] Yes", "[epistemic status:50] Yes"), tiny_tokenizer,
                       {"enable_thinking": False}, 512, confidence_loss="calibration", number_ids=numbers.ids)


def test_on_a_tokenizer_that_splits_numbers_the_first_token_is_the_first_digit(smollm2_tokenizer):
    numbers = number_tokens(smollm2_tokenizer, set(NUMBERS))
    assert numbers.ids == [smollm2_tokenizer.encode(d, add_special_tokens=False)[0] for d in "0123456789"]
    assert numbers.values == first_digit_values(NUMBERS) and numbers.prefix == "[epistemic status: "
    with pytest.raises(AOCalibError, match="begins 10 and 100 with the same one"):
        number_tokens(smollm2_tokenizer, {0, 10, 100})


@pytest.mark.parametrize("tag_fraction", [1.0, 0.0])
def test_the_number_stays_in_every_rows_cross_entropy_and_its_place_is_recorded(smollm2_tokenizer, tag_fraction):
    """The drawn number's digits in the mask of every row (the prior the penalty moves), the rest of the tag as
    tag_loss_fraction says; the indices point at the first digit and at the answer's tokens."""
    encoded = tokenize_pairs(rows("[epistemic status: 100] Yes", "[epistemic status: 0] not stated"),
                             smollm2_tokenizer, {}, 512, tag_loss_fraction=tag_fraction, confidence_loss="calibration")
    for row, number, answer in zip(encoded, ("100", "0"), (" Yes", " not stated")):
        ids, mask = row["input_ids"], row["completion_mask"]
        at = row["confidence_index"]
        assert smollm2_tokenizer.decode(ids[at:at + len(number)]) == number and all(mask[at:at + len(number)])
        assert smollm2_tokenizer.decode(ids[row["answer_start"]:row["answer_end"]]) == answer
        assert all(mask[row["answer_start"]:row["answer_end"]])
        in_loss = smollm2_tokenizer.decode([i for i, m in zip(ids, mask) if m])
        assert ("epistemic" in in_loss) == (tag_fraction == 1.0) and number in in_loss


def test_a_row_can_keep_its_answer_out_of_the_loss(smollm2_tokenizer):
    encoded = tokenize_pairs(rows("[epistemic status: 50] No", answer_in_loss=False), smollm2_tokenizer, {}, 512,
                             confidence_loss="calibration")[0]
    mask = encoded["completion_mask"]
    assert not any(mask[encoded["answer_start"]:encoded["answer_end"]])
    assert "No" not in smollm2_tokenizer.decode([i for i, m in zip(encoded["input_ids"], mask) if m])
    cut = tokenize_pairs(rows("[epistemic status: 50] No"), smollm2_tokenizer, {}, encoded["answer_start"],
                         confidence_loss="calibration")[0]  # max_length cuts the answer off
    assert cut["answer_start"] == cut["answer_end"] == -1 and cut["confidence_index"] > 0


def test_a_row_that_names_the_answers_its_label_was_drawn_from_records_their_tokens(smollm2_tokenizer):
    """warmup.calibration_expected_over_draw: each named answer's one token where the row's answer starts (the
    label's own among them); nothing for a row that names none, and no column without the key. An answer that is
    more than one token there is refused, naming the row."""
    drawn = rows("[epistemic status: 50] No", answer_in_loss=False, drawn_from=("Yes", "No"))
    plain_row = rows("[epistemic status: 90] Yes")
    for row in (*tokenize_pairs(drawn, smollm2_tokenizer, {}, 512, confidence_loss="calibration",
                                expected_over_draw=True),
                *tokenize_pairs(plain_row, smollm2_tokenizer, {}, 512, confidence_loss="calibration",
                                expected_over_draw=True)):
        choices = row[calibration_loss.CHOICES]
        assert [smollm2_tokenizer.decode([t]) for t in choices] == ([" Yes", " No"] if choices else [])
        assert choices == [] or row["input_ids"][row["answer_start"]] == choices[1]  # the label, No, is the second
    assert len(tokenize_pairs(plain_row, smollm2_tokenizer, {}, 512, confidence_loss="calibration",
                              expected_over_draw=True)[0][calibration_loss.CHOICES]) == 0
    assert calibration_loss.CHOICES not in tokenize_pairs(drawn, smollm2_tokenizer, {}, 512,
                                                          confidence_loss="calibration").column_names
    with pytest.raises(AOCalibError, match=r"row 0 names 'not stated', which this tokenizer writes as 2 tokens"):
        tokenize_pairs(rows("[epistemic status: 50] No", drawn_from=("Yes", "not stated")), smollm2_tokenizer, {}, 512,
                       confidence_loss="calibration", expected_over_draw=True)


def test_on_a_drawn_label_the_term_takes_the_mean_probability_of_the_answers_it_was_drawn_from(smollm2_source,
                                                                                             smollm2_tokenizer):
    """On SmolLM2's own weights: for a row that names the answers its label was drawn from, c is the mean of
    their probabilities at the answer's first position (whichever the label is), not the label's probability;
    a row that names none keeps the label's. The collator pads the rows' answer lists with -1."""
    from ao_calib.config.compose import compose_run_config as compose
    from ao_calib.models import loading as models
    from ao_calib.trainers.common import BackboneStates
    from ao_calib.trainers.sft import IndexColumns

    model = models.load_base_model(compose(["experiment=oracle_smollm2"]).model, smollm2_source).eval()
    texts = ["[epistemic status: 50] No", "[epistemic status: 50] Yes", "[epistemic status: 50] Yes"]
    encoded = [tokenize_pairs(rows(text, drawn_from=drawn), smollm2_tokenizer, {}, 512, confidence_loss="calibration",
                              expected_over_draw=True)[0]
               for text, drawn in zip(texts, (("Yes", "No"), ("Yes", "No"), ()))]
    batch = IndexColumns(lambda examples: {})(encoded)
    assert batch[calibration_loss.CHOICES].tolist()[2] == [-1, -1]
    input_ids = torch.tensor([r["input_ids"] for r in encoded])  # the same length: no padding
    indices = {key: batch[key] for key in (*calibration_loss.COLUMNS, calibration_loss.CHOICES)}
    with torch.no_grad(), BackboneStates(model.model) as hidden:
        logits = model(input_ids=input_ids).logits
    _, logs = calibration_loss.calibration_term(torch.cat(hidden.outputs), model.lm_head, input_ids, indices,
                                                *number_tokens(smollm2_tokenizer, set(NUMBERS))[:2])
    start = int(indices["answer_start"][0])
    p = logits[:, start - 1].float().softmax(-1)
    yes, no = encoded[0][calibration_loss.CHOICES]
    expected = [(p[0, yes] + p[0, no]) / 2, (p[1, yes] + p[1, no]) / 2, p[2, yes]]
    assert logs["calibration/answer_probability"] == pytest.approx(float(sum(expected)) / 3, abs=1e-5)
    assert float(expected[0]) != pytest.approx(float(p[0, no]), abs=1e-3)  # not the label's own probability


@pytest.mark.slow
def test_an_sft_stage_trains_with_the_term_which_reads_the_model_and_moves_the_number(smollm2_source, tmp_path):
    """On SmolLM2 (real weights, LoRA, TRL's SFTTrainer through build_sft_trainer): a stage with
    warmup.confidence_loss=calibration trains and logs the term's figures, from the step
    warmup.calibration_loss_start names (the first of three left out). Then, on the trained model, the term equals a
    hand computation from the full logits (the digit distribution before the first digit; the product of the answer
    tokens' probabilities), and a few gradient steps on the term alone lower it and bring the number the rows state
    on average closer to that probability (which is read again after each step: it carries no gradient, and the
    answer's tokens move only with the weights they share with the number)."""
    from ao_calib.models import loading as models
    from ao_calib.runs.run_dir import RunDir
    from ao_calib.task_api import TaskData
    from ao_calib.trainers.common import BackboneStates, TrainerSetup
    from ao_calib.trainers.sft import build_sft_trainer

    cfg = compose_run_config(["experiment=oracle_smollm2", "warmup.max_steps=3", "warmup.batch_size=2",
                              "warmup.logging_steps=1", "warmup.confidence_loss=calibration", "warmup.max_length=64",
                              "warmup.calibration_loss_start=0.3"])
    model = models.attach_lora(models.load_base_model(cfg.model, smollm2_source), cfg.model, cfg.trainer.lora)
    tokenizer = models.load_tokenizer(smollm2_source)
    train = rows(*[f"[epistemic status: {n}] {'Yes' if n > 50 else 'No'}" for n in (20, 90, 100, 50)])
    trainer = build_sft_trainer(TrainerSetup(cfg.model, model, tokenizer, TaskData(train, train), RunDir(tmp_path)),
                                cfg.warmup, "warmup", [])
    trainer.train()
    logged = [r for r in trainer.state.log_history if "loss" in r]
    assert len(logged) == 3 and not any(key.startswith("calibration/") for key in logged[0])
    for record in logged[1:]:
        assert 0 <= record["calibration/penalty"] <= 1 and 0 <= record["calibration/answer_probability"] <= 1
        assert 0 <= record["calibration/stated_number"] <= 1

    base = model.get_base_model()
    encoded = tokenize_pairs(rows("[epistemic status: 90] Yes", "[epistemic status: 30] No"), tokenizer, {}, 512,
                             confidence_loss="calibration")
    length = max(len(r["input_ids"]) for r in encoded)
    input_ids = torch.tensor([r["input_ids"] + [tokenizer.pad_token_id] * (length - len(r["input_ids"]))
                              for r in encoded])
    attention = torch.tensor([[1] * len(r["input_ids"]) + [0] * (length - len(r["input_ids"])) for r in encoded])
    indices = {key: torch.tensor([r[key] for r in encoded]) for key in calibration_loss.COLUMNS}
    digits, values, _ = number_tokens(tokenizer, set(NUMBERS))

    def term():
        with BackboneStates(base.model) as hidden:
            logits = model(input_ids=input_ids, attention_mask=attention).logits
        value, logs = calibration_loss.calibration_term(torch.cat(hidden.outputs), base.lm_head, input_ids, indices,
                                                        digits, values)
        return value, logs, logits

    value, logs, logits = term()
    hand, probabilities = [], []
    for row in range(2):
        p = logits[row, indices["confidence_index"][row] - 1, digits].softmax(-1)
        a, b = int(indices["answer_start"][row]), int(indices["answer_end"][row])
        c = math.exp(sum(logits[row, t - 1].log_softmax(-1)[input_ids[row, t]].item() for t in range(a, b)))
        probabilities.append(c)
        hand.append(sum(p[d].item() * (values[d] / 100 - c) ** 2 for d in range(10)))
    assert value.item() == pytest.approx(sum(hand) / 2, abs=1e-5)
    assert logs["calibration/answer_probability"] == pytest.approx(sum(probabilities) / 2, abs=1e-5)

    before = abs(logs["calibration/stated_number"] - logs["calibration/answer_probability"])
    optimiser = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)  # the LoRA weights
    for _ in range(3):
        optimiser.zero_grad()
        term()[0].backward()
        optimiser.step()
    after_value, after_logs, _ = term()
    assert after_value.item() < value.item()
    assert abs(after_logs["calibration/stated_number"] - after_logs["calibration/answer_probability"]) < before


def test_the_two_hot_target_shares_its_mass_between_the_two_numbers_around_the_chance_of_being_right():
    values = {0: 0, 1: 100, 2: 20, 5: 50, 9: 90}  # token index -> number, in no order
    targets = calibration_loss.two_hot_targets(values, torch.tensor([0.55, 0.05, 0.97, 1.0, 0.0, 0.5]), 12)
    assert targets.sum(-1).tolist() == pytest.approx([1.0] * 6)
    number_of = torch.zeros(12)
    for token, number in values.items():
        number_of[token] = number
    assert (targets @ number_of).tolist() == pytest.approx([55, 5, 97, 100, 0, 50], abs=1e-4)
    assert targets[0].nonzero().flatten().tolist() == [5, 9]  # 55 lies between 50 and 90: 7/8 on 50
    assert targets[0, 5].item() == pytest.approx(35 / 40)
    assert targets[1, 0].item() == pytest.approx(0.75) and targets[1, 2].item() == pytest.approx(0.25)
    assert targets[3, 1].item() == 1.0 and targets[4, 0].item() == 1.0 and targets[5, 5].item() == 1.0
    assert targets[:, [3, 4, 6, 7, 8, 10, 11]].abs().sum().item() == 0  # tokens that begin no number: none


def test_the_two_hot_term_is_a_cross_entropy_over_the_vocabulary_that_still_pulls_a_wrong_sure_number():
    """With all the mass on one wrong number, the expected penalty's gradient vanishes (it is least at any sure
    number) and the two-hot cross-entropy's does not; the latter is taken over the whole vocabulary, so mass on a
    token that begins no number is charged too. Both equal their hand computation."""
    torch.manual_seed(0)
    vocab, width = 16, 8
    head = torch.nn.Linear(width, vocab, bias=False)
    number_ids = [3, 4, 5]  # token ids of the numbers 0, 50 and 100
    values = {0: 0, 1: 50, 2: 100}
    input_ids = torch.tensor([[1, 2, 4, 9, 10]])  # the number at 2, the answer at 3
    indices = {"confidence_index": torch.tensor([2]), "answer_start": torch.tensor([3]),
               "answer_end": torch.tensor([4])}
    states = torch.zeros(1, 5, width)
    states[0, 1] = 300 * head.weight[5].detach()  # before the number: all its mass on 100
    # before the answer (position 2) the state is zero: every token alike, c = 1/16
    states.requires_grad_(True)
    c = 1 / vocab
    penalty, logs = calibration_loss.calibration_term(states, head, input_ids, indices, number_ids, values)
    assert logs["calibration/answer_probability"] == pytest.approx(c)
    (grad_penalty,) = torch.autograd.grad(penalty, states)
    two_hot, _ = calibration_loss.calibration_term(states, head, input_ids, indices, number_ids, values,
                                                   form="two_hot")
    (grad_two_hot,) = torch.autograd.grad(two_hot, states)
    logp = head(states[0, 1]).log_softmax(-1)
    share = 1 - 100 * c / 50  # 100c = 6.25 lies between 0 and 50
    assert two_hot.item() == pytest.approx(-(share * logp[3] + (1 - share) * logp[4]).item(), rel=1e-5)
    assert penalty.item() == pytest.approx((1 - c) ** 2, rel=1e-6)
    assert grad_penalty.abs().max().item() < 1e-6 < grad_two_hot[0, 1].abs().max().item()
    with pytest.raises(ValueError, match="calibration_loss_form=two_hot: out of range with "
                                         "confidence_loss=cross_entropy"):
        SFTTrainerConfig(calibration_loss_form="two_hot")
    with pytest.raises(ValueError, match="calibration_greedy=true: out of range with confidence_loss=cross_entropy"):
        SFTTrainerConfig(calibration_greedy=True)


def test_with_greedy_c_the_number_learns_whether_greedy_decoding_is_right_not_the_answers_probability():
    """Two rows with the same answer token: on the first it is the most likely token (c = 1 though its probability
    is well below 1), on the second another token is (c = 0); a row whose label was drawn from two answers takes
    the share of them that is the most likely (1/2)."""
    torch.manual_seed(0)
    vocab, width = 16, 8
    head = torch.nn.Linear(width, vocab, bias=False)
    input_ids = torch.tensor([[1, 2, 4, 9, 10]] * 3)  # the number at 2, the answer (token 9) at 3
    indices = {"confidence_index": torch.tensor([2, 2, 2]), "answer_start": torch.tensor([3, 3, 3]),
               "answer_end": torch.tensor([4, 4, 4]),
               calibration_loss.CHOICES: torch.tensor([[-1, -1], [-1, -1], [9, 11]])}
    states = torch.zeros(3, 5, width)
    states[0, 2] = head.weight[9].detach() / head.weight[9].norm().item() ** 2 * 2  # token 9 ahead, not sure
    states[1, 2] = head.weight[12].detach() / head.weight[12].norm().item() ** 2 * 2
    states[2, 2] = states[0, 2]
    probability = head(states[0, 2]).softmax(-1)
    assert probability.argmax().item() == 9 and probability[9].item() < 0.9
    args = (states, head, input_ids, indices, [3, 4, 5], {0: 0, 1: 50, 2: 100})
    _, logs = calibration_loss.calibration_term(*args, greedy=True)
    assert logs["calibration/answer_probability"] == pytest.approx((1 + 0 + 0.5) / 3)
    _, logs = calibration_loss.calibration_term(*args)
    p11 = head(states[2, 2]).softmax(-1)[11].item()
    assert logs["calibration/answer_probability"] == pytest.approx(
        (probability[9].item() + head(states[1, 2]).softmax(-1)[9].item() + (probability[9].item() + p11) / 2) / 3,
        rel=1e-5)
