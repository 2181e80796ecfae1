"""Model loading through the real from_pretrained path, and LoRA placement on both tiny architectures."""

from __future__ import annotations

import re

import pytest
from ao_calib.config.compose import compose_run_config

from ao_calib.core.errors import ResourceUnavailableError
from ao_calib.models import loading as models


def model_cfg(*overrides):
    return compose_run_config(["task=function_call", *overrides])


@pytest.mark.parametrize("name,cls", [("tiny_qwen3", "Qwen3ForCausalLM"),
                                      ("tiny_gemma3", "Gemma3ForConditionalGeneration")])
def test_lora_lands_only_on_decoder_layers(name, cls):
    cfg = model_cfg(f"model={name}", "trainer.lora.layers=2", "trainer.lora.rank=4")
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    base = models.load_base_model(cfg.model, source)
    assert type(base).__name__ == cls
    model = models.attach_lora(base, cfg.model, cfg.trainer.lora)
    lora_modules = [n for n, _ in model.named_modules() if n.endswith(".lora_A")]
    layer_ids = {int(re.search(r"layers\.(\d+)\.", n).group(1)) for n in lora_modules}
    assert layer_ids == {2, 3}  # the last 2 of 4 layers
    assert not any("vision" in n for n in lora_modules)  # Gemma's SigLIP tower has q_proj too
    assert len(lora_modules) == 2 * 7  # every target module of each chosen layer
    assert model.peft_config["default"].r == 4
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


def test_lora_overrides_fall_back_to_the_model_config():
    cfg = model_cfg("model=qwen3_8b", "trainer.lora.alpha=7")
    assert models.lora_settings(cfg.model, cfg.trainer.lora) == {
        "rank": 64, "alpha": 7, "dropout": 0.05, "layers": None, "modules_to_save": [],
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


def test_modules_to_save_trains_the_embeddings_and_keeps_them_tied_to_the_output_layer():
    import torch

    cfg = model_cfg("model=tiny_qwen3", "model.lora.modules_to_save=[embed_tokens]")
    model = models.attach_lora(models.load_base_model(cfg.model, models.model_source(cfg.model, cfg.paths.cache_dir)),
                               cfg.model, cfg.trainer.lora)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("embed_tokens" in n for n in trainable) and any("lora_" in n for n in trainable)
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    with torch.no_grad():
        embedding.weight[7] += 1.0  # the trained copy of the embedding, as an optimiser step would change it
    assert torch.equal(head.weight[7], embedding.weight[7])  # the tiny Qwen3 ties them; training keeps them tied


def test_target_regex_matches_only_the_chosen_layers():
    rx = re.compile(models.lora_target_regex("model.language_model.layers", 4, ["q_proj", "down_proj"], 1))
    assert rx.match("model.language_model.layers.3.self_attn.q_proj")
    assert rx.match("model.language_model.layers.3.mlp.down_proj")
    assert not rx.match("model.language_model.layers.2.self_attn.q_proj")
    assert not rx.match("model.vision_tower.vision_model.encoder.layers.3.self_attn.q_proj")
    assert not rx.match("model.language_model.layers.3.self_attn.q_proj_extra")


def test_missing_gpu_is_reported_before_any_download(monkeypatch):
    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: False)
    cfg = model_cfg("model=gemma3_27b")
    with pytest.raises(ResourceUnavailableError) as info:
        models.check_model_available(cfg.model, cfg.model.ao_lora_id)
    message = str(info.value)
    assert "CUDA GPU" in message and "google/gemma-3-27b-it" in message
    assert "adamkarvonen/checkpoints_latentqa_cls_past_lens_gemma-3-27b-it" in message
    assert "experiment=quickstart" in message


def test_the_model_config_can_replace_the_chat_template_and_names_options_the_template_never_reads(caplog):
    cfg = model_cfg("model=tiny_gemma3", "+model.chat_template_kwargs.enable_thinking=false")
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    with caplog.at_level("WARNING", logger="ao_calib.models.loading"):
        tokenizer = models.load_tokenizer(source, cfg.model)
    assert "never reads enable_thinking" in caplog.text  # Gemma 3's template has no thinking mode
    assert "enable_thinking" not in model_cfg("model=tiny_gemma3").model.chat_template_kwargs
    own = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)

    cfg.model.chat_template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    caplog.clear()
    replaced = models.load_tokenizer(source, cfg.model)
    assert replaced.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "[user] hi\n" != own
    assert "enable_thinking" in caplog.text  # the replacement does not read it either
