"""Activation extraction against a full forward pass, early stopping, adapter bypass, and the disk cache."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.steering.activations import (ActivationCache, ExtractionStats, PositionRule, extract_activations,
                                  layer_indices, target_text)
from ao_calib.steering.layout import get_decoder_layers

PROMPTS = ["How do I bake sourdough bread at home?", "Write a poem about the sea.",
           "My Python script crashes with a KeyError, can you help me debug it please?"]


@pytest.fixture(scope="module", params=["qwen3", "gemma3"])
def tiny(request, offline_env):
    path = ensure_tiny_model(TinyModelSpec(family=request.param), offline_env / "tiny_models")
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def test_layer_indices_follow_the_reference_formula():
    assert layer_indices(36, [25, 50, 75]) == [9, 18, 27]  # Qwen3-8B
    assert layer_indices(62, [25, 50, 75]) == [15, 31, 46]  # Gemma 3 27B text config
    assert layer_indices(4, [25, 50, 75]) == [1, 2, 3]


def test_target_text_is_one_user_turn_without_generation_prompt(tiny):
    tokenizer, _ = tiny
    text = target_text(tokenizer, "hi there")
    assert text.endswith(("<|im_end|>\n", "<end_of_turn>\n")) and "assistant" not in text and "model\n" not in text


@pytest.mark.parametrize("rule", [PositionRule("last_k", k=4), PositionRule("full"),
                                  PositionRule("window", window_min=2, window_max=5, seed=3),
                                  PositionRule("last_k", k=64, skip_first=1), PositionRule("full", skip_first=2)])
def test_extraction_matches_a_full_forward_pass(tiny, rule):
    tokenizer, model = tiny
    layers = [1, 2]
    acts = extract_activations(model, tokenizer, PROMPTS, layers, rule, batch_size=2)
    for prompt, got in zip(PROMPTS, acts):
        ids = tokenizer(target_text(tokenizer, prompt), return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            hidden = model(**ids, output_hidden_states=True).hidden_states
        positions = rule.select(ids["input_ids"].shape[1], target_text(tokenizer, prompt))
        for k in layers:
            torch.testing.assert_close(got[k], hidden[k + 1][0, positions], rtol=1e-4, atol=1e-5)
    if rule.kind == "window":  # the window is a function of the text: the same on every call
        again = extract_activations(model, tokenizer, PROMPTS, layers, rule)
        for a, b in zip(acts, again):
            torch.testing.assert_close(a[1], b[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["last_k", "window", "full"])
def test_no_rule_reads_the_skipped_leading_tokens(kind):
    """task.activations.skip_first: the first tokens (an attention sink) are never read, whatever the rule; the
    rule is unchanged elsewhere, and a text with nothing after them is refused."""
    rule = PositionRule(kind, k=30, window_min=1, window_max=40, skip_first=2)
    plain = PositionRule(kind, k=30, window_min=1, window_max=40)
    for n in range(3, 60):
        got = rule.select(n, f"text {n}")
        assert got and min(got) >= 2 and max(got) < n and got == list(range(got[0], got[-1] + 1))
        if kind != "window":
            assert got == [i for i in plain.select(n, f"text {n}") if i >= 2]
    assert PositionRule("last_k", k=3, skip_first=1).select(10, "t") == [7, 8, 9]
    with pytest.raises(ValueError, match="none after the first skip_first=2"):
        rule.select(2, "two tokens")


def test_forward_stops_after_the_deepest_layer(tiny):
    tokenizer, model = tiny
    calls = []
    handle = get_decoder_layers(model)[3].register_forward_hook(lambda *a: calls.append(1))
    extract_activations(model, tokenizer, PROMPTS, [1, 2], PositionRule("last_k", k=2))
    handle.remove()
    assert calls == []


def test_adapter_is_disabled_during_extraction(tiny):
    tokenizer, base = tiny
    rule = PositionRule("last_k", k=3)
    want = extract_activations(base, tokenizer, PROMPTS, [2], rule)
    peft = get_peft_model(copy.deepcopy(base), LoraConfig(r=4, target_modules=["q_proj", "v_proj", "o_proj"],
                                                          init_lora_weights=False, task_type="CAUSAL_LM"))
    got = extract_activations(peft, tokenizer, PROMPTS, [2], rule)
    for a, b in zip(want, got):
        torch.testing.assert_close(a[2], b[2])
    with torch.no_grad():  # the adapter does change the model when enabled, so the check above means something
        ids = tokenizer(PROMPTS[0], return_tensors="pt")
        assert not torch.allclose(base(**ids).logits, peft(**ids).logits)


def test_cache_reuses_results_without_a_forward_pass(tiny, tmp_path):
    tokenizer, model = tiny
    rule = PositionRule("last_k", k=3)
    first, second = ExtractionStats(), ExtractionStats()
    cache = ActivationCache(tmp_path, model_id="tiny")
    a = extract_activations(model, tokenizer, PROMPTS, [1, 3], rule, cache=cache, stats=first)
    b = extract_activations(model, tokenizer, PROMPTS, [1, 3], rule, cache=ActivationCache(tmp_path, "tiny"),
                            stats=second)
    assert first.forward_passes > 0 and second.forward_passes == 0 and second.cache_hits == len(PROMPTS)
    assert all(torch.equal(x[3], y[3]) for x, y in zip(a, b))
    other = ExtractionStats()
    extract_activations(model, tokenizer, PROMPTS, [1, 3], PositionRule("last_k", k=4),
                        cache=ActivationCache(tmp_path, "tiny"), stats=other)
    assert other.cache_hits == 0  # a different position rule is a different key
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_damaged_cache_file_is_recomputed(tiny, tmp_path):
    tokenizer, model = tiny
    rule = PositionRule("last_k", k=2)
    cache = ActivationCache(tmp_path, "tiny")
    good = extract_activations(model, tokenizer, PROMPTS[:1], [1], rule, cache=cache)
    victim = next(tmp_path.rglob("*.safetensors"))
    victim.write_bytes(victim.read_bytes()[:20])  # as if a writer had been killed without the atomic rename
    stats = ExtractionStats()
    again = extract_activations(model, tokenizer, PROMPTS[:1], [1], rule, cache=ActivationCache(tmp_path, "tiny"),
                                stats=stats)
    assert stats.forward_passes == 1
    torch.testing.assert_close(good[0][1], again[0][1])
