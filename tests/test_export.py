"""``python -m ao_calib.export``: the adapter, or the merged model, with tokenizer, chat template and model card,
loads with the standard classes and gives the same outputs as the run's own base model + adapter."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from ao_calib import models
from ao_calib.config import compose_run_config
from ao_calib.export import main
from ao_calib.run_dir import RunDir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished run's files (config, adapter, tokenizer, eval.json) with a LoRA that changes the outputs."""
    path = tmp_path_factory.mktemp("run")
    cfg = compose_run_config(["experiment=function_call_tiny"])
    OmegaConf.save(cfg, path / RunDir.CONFIG)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero, which would make the adapter a no-op
                param.normal_(0, 0.5)
    run = RunDir(path)
    model.save_pretrained(str(run.adapter))
    models.load_tokenizer(source).save_pretrained(str(run.adapter))
    run.eval_report().write_text(json.dumps({"num_samples": 8, "headline_metric": "tool_call_exact",
                                             "metrics": {"tool_call_exact": 0.25, "accuracy": 0.25}}))
    return path


def _logits(model, tokenizer):
    messages = [{"role": "user", "content": "What is Fibonacci number 7?"}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        return model(input_ids=ids["input_ids"]).logits


def _reference(run_dir):
    from ao_calib.config import load_run_config

    cfg = load_run_config(RunDir(run_dir).config)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.load_trained_model(cfg.model, source, RunDir(run_dir).adapter).eval()
    base = models.load_base_model(cfg.model, source).eval()
    return model, base, models.load_tokenizer(source)


@pytest.mark.parametrize("merge", [False, True])
def test_export_round_trips(run_dir, tmp_path, merge):
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "export"
    assert main([f"run_dir={run_dir}", f"out={out}", f"merge={str(merge).lower()}"]) == 0
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template and (out / "chat_template.jinja").is_file()
    loaded = (AutoModelForCausalLM if merge else AutoPeftModelForCausalLM).from_pretrained(out).eval()
    assert not (out / "adapter_config.json").exists() if merge else (out / "adapter_config.json").exists()
    reference, base, ref_tokenizer = _reference(run_dir)
    expected = _logits(reference, ref_tokenizer)
    assert not torch.allclose(expected, _logits(base, ref_tokenizer), atol=1e-3)  # the adapter matters
    torch.testing.assert_close(_logits(loaded, tokenizer), expected, atol=1e-4, rtol=1e-4)
    card = (out / "README.md").read_text()
    assert "| tool_call_exact | 0.2500 |" in card and "task `function_call`" in card
    assert "generate:" in card.split("## Held-out")[0]  # the data settings
    assert "max_steps: 3" in card.split("## Training config")[1]  # the full config
    assert ("AutoModelForCausalLM.from_pretrained" if merge else "AutoPeftModelForCausalLM") in card


def test_refuses_missing_adapter_and_non_empty_out(run_dir, tmp_path, capsys):
    assert main([f"run_dir={tmp_path}"]) == 2
    assert "not a run directory" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main([f"run_dir={run_dir}", f"out={tmp_path / 'full'}"]) == 2
    assert "not empty" in capsys.readouterr().err
