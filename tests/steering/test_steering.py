"""Layer-1 injection against an independent computation of the formula, on both tiny architectures and on a real
pretrained Llama-layout model (SmolLM2-135M-Instruct)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.steering import SteeringError, steer
from ao_calib.steering.layout import get_decoder_layers
from ao_calib_tasks.oracle.prompt import encode_oracle_prompt, placeholder_token_id

FAMILIES = ["qwen3", "gemma3", "smollm2"]


@pytest.fixture(scope="module", params=FAMILIES)
def tiny(request, offline_env):
    if request.param == "smollm2":
        path = request.getfixturevalue("smollm2_source")
    else:
        path = ensure_tiny_model(TinyModelSpec(family=request.param), offline_env / "tiny_models")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return tokenizer, model


def left_padded_batch(tokenizer, questions_and_counts):
    rows = [encode_oracle_prompt(tokenizer, 2, k, q) for q, k in questions_and_counts]
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _ in rows])
    attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in rows])
    positions = [[p + width - len(ids) for p in pos] for ids, pos in rows]
    return input_ids, attention, positions


def layer_output(model, input_ids, attention, layer=1):
    seen = {}
    handle = get_decoder_layers(model)[layer].register_forward_hook(
        lambda m, a, o: seen.__setitem__("h", (o[0] if isinstance(o, tuple) else o).detach().clone()))
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=attention)
    handle.remove()
    return seen["h"]


def expected_by_hand(h, vectors, positions, mode, c):
    out = h.clone()
    for b, (vs, ps) in enumerate(zip(vectors, positions)):
        for v, p in zip(vs, ps):
            hv = h[b, p]
            unit = v / torch.sqrt((v * v).sum())
            norm = torch.sqrt((hv * hv).sum())
            out[b, p] = (hv if mode == "add" else 0) + c * norm * unit
    return out


@pytest.mark.parametrize("mode,c", [("add", 1.0), ("add", 2.5), ("replace", 1.0)])
def test_injection_matches_the_formula(tiny, mode, c):
    tokenizer, model = tiny
    input_ids, attention, positions = left_padded_batch(tokenizer, [("Is this about cooking?", 3),
                                                                     ("Is the user happy?", 5)])
    d = model.config.get_text_config().hidden_size
    gen = torch.Generator().manual_seed(0)
    vectors = [torch.randn(len(p), d, generator=gen) * 7 for p in positions]
    plain = layer_output(model, input_ids, attention)
    with steer(model, vectors, positions, layer=1, mode=mode, coefficient=c,
               check_token_id=placeholder_token_id(tokenizer)):
        steered = layer_output(model, input_ids, attention)  # this hook runs after the steering hook
    torch.testing.assert_close(steered, expected_by_hand(plain, vectors, positions, mode, c), rtol=1e-5, atol=1e-5)
    untouched = torch.ones_like(plain[..., 0], dtype=torch.bool)
    for b, ps in enumerate(positions):
        untouched[b, ps] = False
    assert torch.equal(steered[untouched], plain[untouched])


def test_steering_changes_the_output_only_while_open(tiny):
    tokenizer, model = tiny
    input_ids, attention, positions = left_padded_batch(tokenizer, [("Is this about cooking?", 2)])
    d = model.config.get_text_config().hidden_size
    with torch.no_grad():
        before = model(input_ids=input_ids, attention_mask=attention).logits
        with steer(model, [torch.ones(2, d)], positions):
            during = model(input_ids=input_ids, attention_mask=attention).logits
        after = model(input_ids=input_ids, attention_mask=attention).logits
    assert not torch.allclose(before, during)
    torch.testing.assert_close(before, after)


def test_generation_injects_on_prefill_only(tiny):
    tokenizer, model = tiny
    input_ids, attention, positions = left_padded_batch(tokenizer, [("Is this about cooking?", 3),
                                                                     ("Does it mention Paris?", 1)])
    d = model.config.get_text_config().hidden_size
    stats = Counter()
    with steer(model, [torch.randn(len(p), d) for p in positions], positions, stats=stats,
               check_token_id=placeholder_token_id(tokenizer)):
        out = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=5, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > input_ids.shape[1]
    assert stats["passes"] == 1 and stats["checked_rows"] == 2  # the prefill; decode steps pass through


def _lora_grads(base, tokenizer, mode: str, checkpointing: str | None) -> dict[str, torch.Tensor]:
    """LoRA gradients of one steered loss, with the backward pass run after the ``steer`` block has closed (as a
    trainer does when the loss leaves ``compute_loss``), so recomputation cannot lean on the open context."""
    import copy

    torch.manual_seed(0)
    model = get_peft_model(copy.deepcopy(base), LoraConfig(r=4, target_modules=["q_proj", "v_proj", "o_proj"],
                                                           init_lora_weights=False, task_type="CAUSAL_LM"))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": checkpointing == "reentrant"})
        model.enable_input_require_grads()
    model.train()
    input_ids, attention, positions = left_padded_batch(tokenizer, [("Is this about cooking?", 2), ("Mood?", 3)])
    d = base.config.get_text_config().hidden_size
    vectors = [torch.randn(len(p), d, generator=torch.Generator().manual_seed(i)) for i, p in enumerate(positions)]
    stats = Counter()
    with steer(model, vectors, positions, mode=mode, stats=stats, check_token_id=placeholder_token_id(tokenizer)):
        loss = model(input_ids=input_ids, attention_mask=attention, labels=input_ids).loss
    loss.backward()
    assert stats["checked_rows"] == 2
    # Adapters outside the text stack (Gemma 3's vision tower) get no gradient from a text-only loss.
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if "lora_" in n and p.grad is not None}


@pytest.mark.parametrize("mode", ["add", "replace"])
@pytest.mark.parametrize("checkpointing", ["reentrant", "non_reentrant"])
def test_gradient_checkpointing_gives_the_gradients_of_a_run_without_it(tiny, mode, checkpointing):
    """Before transformers 5.23 a decoder layer checkpoints its whole ``__call__``, forward hooks included, so the
    backward pass re-runs the injection layer with the hook already removed: non-reentrant checkpointing raised
    CheckpointError and reentrant checkpointing gave silently wrong gradients. ``steer`` keeps the injection layer
    out of checkpointing; this holds on every transformers version the project allows."""
    tokenizer, base = tiny
    expected = _lora_grads(base, tokenizer, mode, None)
    got = _lora_grads(base, tokenizer, mode, checkpointing)
    assert expected.keys() == got.keys() and expected
    assert any(g.abs().sum() > 0 for g in expected.values())
    for name, g in expected.items():
        err = (got[name] - g).norm() / g.norm().clamp_min(1e-12)
        assert err < 1e-4, f"{name}: relative error {err:.2e} against no checkpointing"


def test_misaligned_batches_are_refused(tiny):
    tokenizer, model = tiny
    input_ids, attention, positions = left_padded_batch(tokenizer, [("Is this about cooking?", 2)])
    d = model.config.get_text_config().hidden_size
    with pytest.raises(SteeringError, match="rows"):
        with steer(model, [torch.ones(2, d)] * 2, positions * 2), torch.no_grad():
            model(input_ids=input_ids, attention_mask=attention)
    shifted = [[p - 1 for p in positions[0]]]
    with pytest.raises(SteeringError, match="placeholder"):
        with steer(model, [torch.ones(2, d)], shifted, check_token_id=placeholder_token_id(tokenizer)), \
                torch.no_grad():
            model(input_ids=input_ids, attention_mask=attention)
