"""`task=oracle model=qwen3_8b` (and gemma3_27b) is the oracle design notes' experiment, and a machine without
what it needs is told so, in one message listing one missing thing a line, before anything loads."""

from __future__ import annotations

import pytest
from ao_calib.config.compose import compose_run_config

from tests.helpers.commands import run_cli

# The design notes' hyperparameter table, as config keys.
SEED_TABLE = {
    "trainer.num_generations": 8,
    "trainer.beta": 0.05,
    "task.calibration.lam": 0.5,
    "trainer.lr": 1e-6,
    "model.lora.rank": 64,
    "trainer.temperature": 0.9,
    "task.layer_percents": [25, 50, 75],
    "task.data.path": "ceselder/wildchat-oracle-questions",
    "judge.name": "litellm",
    "warmup.name": "format",
    "eval.initial": True,
    "logger.name": "wandb",
}


def value(cfg, key):
    from omegaconf import OmegaConf

    node = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(node) if OmegaConf.is_config(node) else node


@pytest.mark.parametrize("model,adapter,mode", [
    ("qwen3_8b", "adamkarvonen/checkpoints_all_single_and_multi_pretrain_cls_latentqa_posttrain_Qwen3-8B", "replace"),
    ("gemma3_27b", "adamkarvonen/checkpoints_latentqa_cls_past_lens_gemma-3-27b-it", "add"),
])
def test_the_design_card_command_composes_the_notes_recipe(model, adapter, mode):
    cfg = compose_run_config(["task=oracle", f"model={model}"])
    assert {key: value(cfg, key) for key in SEED_TABLE} == SEED_TABLE
    assert (cfg.model.ao_lora_id, cfg.model.steering_mode) == (adapter, mode)
    assert cfg.task.calibration.credit == "sequence"  # GRPO as the notes run it


def test_the_recipe_is_only_for_its_task_and_model():
    tiny = compose_run_config(["task=oracle", "model=tiny_qwen3"])  # the own-data command stays offline
    assert tiny.judge.name == "none" and tiny.warmup is None and tiny.task.data.path is None
    other = compose_run_config(["task=function_call", "model=qwen3_8b"])
    assert other.judge.name == "none" and other.warmup is None
    ppo = compose_run_config(["task=oracle", "model=qwen3_8b", "trainer=ppo"])  # the recipe is GRPO's
    assert ppo.judge.name == "none" and ppo.task.data.path is None
    dropped = compose_run_config(["task=oracle", "model=qwen3_8b", "~recipe", "judge=label"])
    assert dropped.judge.name == "label" and dropped.task.data.path is None


def test_without_gpu_hub_or_key_the_run_stops_in_one_message_naming_each(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run_cli("ao_calib.run", "task=oracle", "model=qwen3_8b", f"paths.output_dir={tmp_path}",
                     env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1 and lines[errors[0]].endswith(" needs:")
    problems = [line for line in lines[errors[0] + 1:] if line.startswith("  - ")]  # one a line
    for needed in ("CUDA GPU", "'Qwen/Qwen3-8B'", "checkpoints_all_single_and_multi", "ceselder/wildchat-oracle-questions",
                   "OPENAI_API_KEY"):
        assert len([line for line in problems if needed in line]) == 1, needed
    assert "experiment=oracle_seed_tiny" in result.stderr
    assert "Loading weights" not in result.stderr  # nothing was loaded


def test_a_group_choice_the_recipe_would_merge_over_is_refused():
    result = run_cli("ao_calib.run", "task=oracle", "model=qwen3_8b", "judge=label", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    assert "judge=label would not take effect" in result.stderr and "~recipe" in result.stderr
