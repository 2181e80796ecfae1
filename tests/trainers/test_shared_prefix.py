"""``trainer.shared_prefix=true`` against TRL's own loss pass: the same log-probabilities, entropies and LoRA
gradients with each distinct prompt run once (tiny Qwen3 and Gemma 3, SmolLM2; on TRL's LM head and on
``lm_head=full``), and a shuffle that keeps each prompt's rows together."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.trainers.lm_head import install_full_logits
from ao_calib.trainers.shared_prefix import (
    SharedPrefixMixin,
    prompt_groups,
    shuffle_by_prompt,
)

TEMPERATURE = 0.8


@pytest.fixture(scope="module")
def lora_model(request, offline_env):
    family, _, head = request.param.partition("-")
    if family == "smollm2":  # a real pretrained Llama-layout model
        path = request.getfixturevalue("smollm2_source")
    else:
        path = ensure_tiny_model(TinyModelSpec(family=family), offline_env / "tiny_models")
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    add_fused_lm_head(base, temperature=TEMPERATURE, outputs=("log_probs", "entropy"))  # as GRPOTrainer does
    if head == "full":  # then lm_head=full over it (the default on a CPU): the prefix's KV cache goes through it
        assert install_full_logits(base, temperature=TEMPERATURE)
    # init_lora_weights=False: B is random too, so the adapter changes the outputs and has gradients everywhere
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                            init_lora_weights=False))
    model.train()
    return model


def grpo_rows(vocab: int):
    """Three prompts of different lengths, left-padded, each with three completions of different lengths,
    right-padded (the rows of a prompt not next to each other), as TRL's loss pass receives them."""
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(5, vocab, (n,), generator=gen).tolist() for n in (7, 11, 4)]
    rows = [(p, torch.randint(5, vocab, (n,), generator=gen).tolist())
            for n in (3, 6, 5) for p in prompts]
    width_p, width_c = max(len(p) for p in prompts), max(len(c) for _, c in rows)
    ids = torch.tensor([[0] * (width_p - len(p)) + p + c + [0] * (width_c - len(c)) for p, c in rows])
    mask = torch.tensor([[0] * (width_p - len(p)) + [1] * (len(p) + len(c)) + [0] * (width_c - len(c))
                         for p, c in rows])
    return ids, mask, width_c


class Host:
    """The attributes of a trainer that the two loss passes read."""

    def __init__(self, model):
        self.model = model
        self.accelerator = SimpleNamespace(autocast=nullcontext, is_main_process=True)
        self.args = SimpleNamespace(report_to=[])
        self.state = SimpleNamespace(global_step=0)


class SharedHost(SharedPrefixMixin, Host):
    pass


def pass_outputs(model, shared: bool, batch_size: int):
    ids, mask, width_c = grpo_rows(model.config.get_text_config().vocab_size)
    model.zero_grad()
    if shared:
        logps, entropy, _ = SharedHost(model, shared_prefix=True)._get_per_token_logps_and_entropies(
            model, ids, mask, width_c, batch_size, compute_entropy=True)
    else:  # TRL 1.16's own method, unbound, on the same model
        logps, entropy, _ = GRPOTrainer._get_per_token_logps_and_entropies(
            Host(model), model, ids, mask, width_c, batch_size, compute_entropy=True)
    completion_mask = mask[:, -width_c:].float()
    weights = torch.linspace(0.5, 1.5, logps.numel()).view_as(logps)  # every token's gradient counts differently
    ((logps * weights * completion_mask).sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logps.detach() * completion_mask, entropy.detach() * completion_mask, grads


# 9 rows in one pass, or in passes of 4 rows (three prompts, one pass of a single row); SmolLM2 in passes of 4 only;
# "-full": both passes score through lm_head=full
@pytest.mark.parametrize("lora_model, batch_size", [("qwen3", 9), ("qwen3", 4), ("gemma3", 9), ("gemma3", 4),
                                                    ("smollm2", 4), ("qwen3-full", 4), ("gemma3-full", 9)],
                         indirect=["lora_model"])
def test_shared_prefix_gives_trls_log_probs_and_gradients(lora_model, batch_size):
    ref_logps, ref_entropy, ref_grads = pass_outputs(lora_model, False, batch_size)
    logps, entropy, grads = pass_outputs(lora_model, True, batch_size)
    assert ref_logps.abs().sum() > 0 and len(ref_grads) > 0
    torch.testing.assert_close(logps, ref_logps, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(entropy, ref_entropy, atol=1e-4, rtol=1e-4)
    assert grads.keys() == ref_grads.keys()
    # Rounding, against each tensor's own scale: TRL's fused LM head keeps float32 accumulators whose error (~1e-5
    # of a gradient, even in float64) depends on how many positions a pass scores, which differ between the two
    # paths; SmolLM2's 30 layers carry it to ~1.3e-4. A row given another prompt's cache is off by order 1.
    for name, grad in grads.items():
        scale = ref_grads[name].abs().max().item()
        assert (grad - ref_grads[name]).abs().max().item() <= 5e-4 * scale + 1e-6, name


def test_prompt_groups_ignore_padding_and_keep_lengths_apart():
    ids = torch.tensor([[0, 5, 6], [9, 5, 6], [0, 5, 6], [5, 6, 7]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1]])
    first, index = prompt_groups(ids, mask)
    assert index[0] == index[2] and len(set(index.tolist())) == 3
    assert sorted(first.tolist()) == [0, 1, 3]


def test_shuffle_by_prompt_keeps_each_prompts_rows_together():
    torch.manual_seed(0)
    prompt = torch.tensor([[p] for p in [0, 1, 2, 3] * 4])  # each prompt's rows apart, as after sampling
    mask = torch.ones_like(prompt)
    batch = {"prompt_ids": prompt, "row": torch.arange(16), "names": [f"r{i}" for i in range(16)],
             "num_items": torch.tensor(5), "old": None}
    orders = set()
    for _ in range(5):
        out = shuffle_by_prompt(batch, prompt, mask)
        runs = out["prompt_ids"].view(4, 4)
        assert (runs == runs[:, :1]).all()  # four runs of one prompt each
        assert sorted(out["row"].tolist()) == list(range(16))
        assert out["names"] == [f"r{i}" for i in out["row"].tolist()]
        assert out["num_items"] == 5 and out["old"] is None
        orders.add(tuple(out["row"].tolist()))
    assert len(orders) > 1  # random, not a fixed sort


def test_a_grpo_stage_runs_each_prompt_once_per_loss_pass(tmp_path, monkeypatch, offline_env):
    """A real GRPO stage (tiny Qwen3, function calling): every micro-batch of its loss holds one prompt's rows,
    whose prefix runs once."""
    from tests.helpers.trainers import build_setup

    from ao_calib.trainers import build_trainer
    from ao_calib.trainers import shared_prefix as module

    calls = []
    original = module.prompt_groups

    def recorded(ids, mask):
        first, index = original(ids, mask)
        calls.append((ids.size(0), first.numel()))
        return first, index

    monkeypatch.setattr(module, "prompt_groups", recorded)
    setup, cfg = build_setup(tmp_path, ["experiment=function_call_tiny", "trainer.shared_prefix=true",
                                        "trainer.micro_batch_size=2", "trainer.max_steps=2", "trainer.beta=0",
                                        "trainer.save_steps=1000"])
    trainer = build_trainer(setup, cfg.trainer)
    trainer.train()
    # 2 prompts x 4 completions a step, in 4 micro-batches of 2 rows: each generation batch is shuffled by
    # prompt (8 rows, 2 prompts), then each loss pass runs one prompt for its 2 rows
    assert calls == [(8, 2), (2, 1), (2, 1), (2, 1), (2, 1)] * 2


@pytest.mark.parametrize("overrides, refusal", [
    (["experiment=quickstart"], "trainer.shared_prefix=true cannot run with task=oracle"),
    (["task=function_call", "model=qwen3_8b"], "cannot run with model.gradient_checkpointing=true"),
])
def test_shared_prefix_is_refused_at_start_up_where_it_cannot_run(overrides, refusal):
    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError

    with pytest.raises(AOCalibError, match=refusal):
        compose_run_config([*overrides, "trainer.shared_prefix=true"])
    compose_run_config(["experiment=function_call_smollm2", "trainer.shared_prefix=true"])  # allowed there


def test_the_benchmark_times_every_side_on_the_tiny_model(capsys):
    """bench.shared_prefix end to end on the tiny Qwen3 (its timings mean nothing here)."""
    from bench import shared_prefix

    table = shared_prefix.main(["--model", "tiny_qwen3", "--rounds", "1", "--prompts", "1", "--generations", "2",
                                "--new-tokens", "4"])
    assert [row.split("|")[1].strip() for row in table[2:]] == [
        "fast_generation + shared_prefix", "ao_calib default", "plain TRL"]
    assert "round 1 shared" in capsys.readouterr().out
