"""How a stage's optimiser step is cut into forward/backward passes: the stage's own micro_batch_size, or the
model's max_micro_batch_size cap where the stage leaves it null."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.trainers.common import per_process, stage_batches


def stage(**fields):
    return OmegaConf.create({"micro_batch_size": None, **fields})


def test_the_model_cap_takes_the_largest_divisor_of_the_step_under_it():
    grpo = stage(batch_size=4, num_generations=8)  # 32 completions a step
    assert per_process(grpo, None) == (32, 1)  # no cap: the whole step in one pass
    assert per_process(grpo, None, cap=4) == (4, 8)
    assert per_process(grpo, None, cap=5) == (4, 8)  # 5 does not divide 32: the largest divisor under it
    assert per_process(stage(batch_size=2, num_generations=3), None, cap=4) == (3, 2)  # 6 a step
    assert per_process(stage(batch_size=7), None, cap=4) == (1, 7)  # a prime step: one row a pass
    assert per_process(grpo, 8, cap=4) == (8, 4)  # the stage's own micro_batch_size wins over the cap
    with pytest.raises(AOCalibError, match="micro_batch_size"):
        per_process(grpo, 5, cap=4)  # one the user typed must divide the step


def test_smollm2_caps_every_trainer_and_the_key_overrides_it():
    cfg = compose_run_config(["task=function_call", "model=smollm2_135m"])
    assert cfg.model.max_micro_batch_size == 4
    assert stage_batches(cfg.model, cfg.trainer) == (4, cfg.trainer.batch_size * cfg.trainer.num_generations // 4)
    cfg = compose_run_config(["task=function_call", "model=smollm2_135m", "trainer.micro_batch_size=8"])
    assert stage_batches(cfg.model, cfg.trainer)[0] == 8
    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3"])
    assert cfg.model.max_micro_batch_size is None and stage_batches(cfg.model, cfg.trainer)[1] == 1
    with pytest.raises(AOCalibError, match="model.max_micro_batch_size"):
        from ao_calib.config.compose import check_values

        check_values(compose_run_config(["task=function_call", "model=smollm2_135m", "model.max_micro_batch_size=0"]))


@pytest.mark.parametrize("in_loss", [True, False])
def test_the_warmup_can_leave_the_stated_number_out_of_the_loss(tiny_tokenizer, in_loss):
    """warmup.confidence_in_loss=false: the tokens of NN in "[epistemic status: NN]" leave the completion mask; every
    other completion token (the tag's form, the answer, the end of turn) stays; the prompt never counts."""
    import datasets

    from ao_calib.trainers.sft import tokenize_pairs

    rows = datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": "Is it about music?"}],
                                        "completion": f"[epistemic status: {n}] Yes"} for n in (7, 60, 100)])
    encoded = tokenize_pairs(rows, tiny_tokenizer, {"enable_thinking": False}, 512, confidence_in_loss=in_loss)
    for row, n in zip(encoded, (7, 60, 100)):
        learned = tiny_tokenizer.decode([i for i, m in zip(row["input_ids"], row["completion_mask"]) if m])
        assert "Is it about music" not in learned and "Yes" in learned and "[epistemic status:" in learned
        assert (str(n) in learned) == in_loss
        kept = sum(row["completion_mask"])
        full = sum(tokenize_pairs(rows, tiny_tokenizer, {"enable_thinking": False}, 512)[0]["completion_mask"])
        assert kept <= full


def test_the_warmup_can_leave_the_tag_out_of_the_loss_in_most_rows(tiny_tokenizer):
    """warmup.tag_loss_fraction: the whole tag leaves the loss in all but about that fraction of rows, the same rows
    for the same seed; the answer and the end of turn always stay."""
    import datasets

    from ao_calib.trainers.sft import tokenize_pairs

    rows = datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": f"Is it about topic {i}?"}],
                                        "completion": f"[epistemic status: {i % 101}] Yes"} for i in range(400)])

    def learned(fraction, seed=0):
        encoded = tokenize_pairs(rows, tiny_tokenizer, {"enable_thinking": False}, 512, tag_loss_fraction=fraction,
                                 seed=seed)
        return [tiny_tokenizer.decode([i for i, m in zip(r["input_ids"], r["completion_mask"]) if m])
                for r in encoded]

    with_tag = ["epistemic" in text for text in learned(0.1)]
    assert all("Yes" in text for text in learned(0.1))
    assert 20 <= sum(with_tag) <= 60  # ~40 of 400
    assert with_tag == ["epistemic" in text for text in learned(0.1)]
    assert with_tag != ["epistemic" in text for text in learned(0.1, seed=1)]
    assert not any("epistemic" in text or "status" in text for text in learned(0.0))
    assert all("epistemic" in text for text in learned(1.0))
