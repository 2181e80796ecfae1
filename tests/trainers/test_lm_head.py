"""``lm_head=full`` against TRL's fused LM head: the same log-probabilities, entropies, top-1 flags, loss and LoRA
gradients from the scored positions' logits (tiny Qwen3 and Gemma 3, SmolLM2), the forward unchanged otherwise, and
real GRPO, PPO and SFT stages that train on it as on TRL's head."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from trl.trainer.utils import add_fused_lm_head

from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.trainers.lm_head import install_full_logits, uses_full_logits

TEMPERATURE = 0.8


@pytest.fixture(scope="module")
def heads(request, offline_env):
    """A LoRA model with TRL's fused head, and the forward with this module's head over it: ``(model, base, trl's
    forward, full forward)``; set ``base.forward`` to pick one."""
    if request.param == "smollm2":  # a real pretrained Llama-layout model
        path = request.getfixturevalue("smollm2_source")
    else:
        path = ensure_tiny_model(TinyModelSpec(family=request.param), offline_env / "tiny_models")
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    add_fused_lm_head(base, temperature=TEMPERATURE, outputs=("log_probs", "entropy", "is_top1"))
    fused = base.forward
    assert install_full_logits(base, temperature=TEMPERATURE)
    full = base.forward
    # init_lora_weights=False: B is random too, so the adapter changes the outputs and has gradients everywhere
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    model.train()
    yield model, base, fused, full
    base.forward = full


def rows(vocab: int, shifted: bool):
    """Four left-padded rows of different lengths; the loss on each row's last 2-5 tokens, as SFT's and GRPO's
    passes score them (``shift_labels``: already shifted, as a pass under sequence parallelism or the shared-prefix
    pass gives them)."""
    gen = torch.Generator().manual_seed(5)
    lengths, scored = (9, 14, 6, 11), (3, 5, 2, 4)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, (n, k) in enumerate(zip(lengths, scored)):
        ids[row, width - n:] = torch.randint(5, vocab, (n,), generator=gen)
        mask[row, width - n:] = 1
        labels[row, width - k:] = ids[row, width - k:]
    if shifted:
        labels = torch.cat([labels[:, 1:], labels.new_full((len(lengths), 1), -100)], dim=1)
        return ids, mask, {"shift_labels": labels}
    return ids, mask, {"labels": labels}


def scored(model, base, forward, shifted: bool, num_items: int | None):
    base.forward = forward
    ids, mask, labels = rows(model.config.get_text_config().vocab_size, shifted)
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, fused_lm_head=True, num_items_in_batch=num_items, **labels)
    weights = torch.linspace(0.5, 1.5, out.log_probs.numel()).view_as(out.log_probs)
    (out.loss + (out.log_probs * weights).sum() + 0.1 * out.entropy.sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return out, grads


@pytest.mark.parametrize("heads", ["qwen3", "gemma3", "smollm2"], indirect=True)
@pytest.mark.parametrize("shifted, num_items", [(False, None), (True, 17)])
def test_full_logits_give_trls_outputs_and_gradients(heads, shifted, num_items):
    model, base, fused, full = heads
    ref, ref_grads = scored(model, base, fused, shifted, num_items)
    out, grads = scored(model, base, full, shifted, num_items)
    assert ref.label_mask.sum() == 14 and torch.equal(out.label_mask, ref.label_mask)
    assert ref.log_probs.abs().sum() > 0 and len(ref_grads) > 0
    for field in ("log_probs", "entropy", "is_top1"):
        torch.testing.assert_close(getattr(out, field), getattr(ref, field), atol=1e-4, rtol=1e-4, msg=field)
    assert (out.log_probs[~out.label_mask] == 0).all() and (out.entropy[~out.label_mask] == 0).all()
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-5, rtol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for name, grad in grads.items():  # rounding, against each tensor's own scale (TRL tiles its sums)
        scale = ref_grads[name].abs().max().item()
        assert (grad - ref_grads[name]).abs().max().item() <= 5e-4 * scale + 1e-6, name


@pytest.mark.parametrize("heads", ["qwen3"], indirect=True)
def test_the_forward_is_unchanged_without_the_flag_and_a_pass_with_nothing_scored_is_zero(heads):
    model, base, fused, full = heads
    ids, mask, _ = rows(model.config.get_text_config().vocab_size, False)
    base.forward = fused
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).logits
        base.forward = full
        torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits, ref)
        generated = model.generate(input_ids=ids[:1, -3:], max_new_tokens=2, do_sample=False)
    assert generated.shape == (1, 5)
    out = model(input_ids=ids, attention_mask=mask, labels=torch.full_like(ids, -100), fused_lm_head=True)
    assert out.loss.item() == 0 and out.log_probs.requires_grad
    out.loss.backward()  # a micro-batch with no completion token still backs up, as on TRL's head


def test_auto_is_full_off_cuda_and_xpu():
    assert uses_full_logits("auto", torch.device("cpu")) and uses_full_logits("full", torch.device("cuda"))
    assert not uses_full_logits("auto", torch.device("cuda")) and not uses_full_logits("auto", torch.device("xpu"))
    assert not uses_full_logits("fused", torch.device("cpu"))


STAGES = {
    # GRPO on the oracle (injection in every pass, a reference pass with beta > 0); the untrained oracle earns one
    # reward on every completion, so its gradient is zero: its entropy is the head's output compared
    "grpo": ("trainer", ["experiment=oracle_tiny", "trainer.batch_size=4", "trainer.num_generations=4",
                         "trainer.beta=0.1", "trainer.max_completion_length=8"]),
    # ao_calib's PPO (its value head reads the backbone that the head's pass runs)
    "ppo": ("trainer", ["task=oracle", "model=tiny_qwen3", "trainer=ppo", "judge=label", "trainer.batch_size=4",
                        "trainer.max_completion_length=8"]),
    # the quickstart's SFT warm-up (injection, the calibration term read off the backbone's states)
    "sft": ("warmup", ["experiment=quickstart", "warmup.batch_size=4"]),
}


@pytest.mark.parametrize("stage_kind", sorted(STAGES))
def test_a_stage_trains_on_either_head_alike(tmp_path, offline_env, stage_kind):
    """A real stage of two steps built with each head from the same seed (bench.lm_head's sides, on one base model
    and one set of rows): the head in use is the one asked for, and the logged loss, entropy and gradient norm of
    both steps agree."""
    from transformers import set_seed

    from ao_calib.trainers.common import peft_base
    from bench.lm_head import Case, sides

    key, overrides = STAGES[stage_kind]
    small = ("task.data.generate.n_train_prompts=16", "task.data.generate.n_test_prompts=8",
             "task.data.generate.n_validation_prompts=8")
    bench, trainers = sides(Case((*overrides, *small), key, steps=2))  # the benchmark's own two sides
    logged = {}
    for head, build in trainers.items():
        set_seed(bench.cfg.trainer.seed)  # as a run does: the LoRA's initial weights come from it
        trainer = build(tmp_path / head)
        assert getattr(peft_base(trainer.model).forward, "full_logits", False) == (head == "full")
        trainer.train()
        logged[head] = [{k: row[k] for k in ("loss", "entropy", "grad_norm") if k in row}
                        for row in trainer.state.log_history if "loss" in row]
    assert len(logged["full"]) == 2 and all(row["entropy"] > 0 for row in logged["full"])
    assert stage_kind == "grpo" or all(row["grad_norm"] > 0 for row in logged["full"])
    for ours, theirs in zip(logged["full"], logged["fused"]):
        for name, value in theirs.items():
            assert ours[name] == pytest.approx(value, rel=1e-3, abs=1e-5), (name, logged)
