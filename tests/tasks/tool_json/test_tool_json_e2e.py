"""task=tool_json end to end on the tiny Qwen3: SFT with validation rates, PPO started from that SFT run, the
chained SFT→PPO preset, the eval and plot CLIs, and RLOO/GRPO on the same task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ao_calib.config.compose import compose_run_config

from ao_calib.core.errors import AOCalibError
from ao_calib.models import loading as models
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.files import read_jsonl
from tests.helpers.trainers import build as build_trainer_from_config

PPO_METRICS = {"ppo/policy_loss", "ppo/value_loss", "ppo/explained_variance", "ppo/kl", "ppo/clip_fraction",
               "rewards/format_reward/mean", "rewards/tool_reward/mean", "rewards/args_reward/mean",
               "rewards/length_penalty/mean", "reward"}


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tool_json") / "sft"
    assert_ok(run_cli("ao_calib.run", "experiment=tool_json_tiny", "eval.initial=false", f"hydra.run.dir={out}"))
    return out


def test_sft_logs_validation_rates(sft_run):
    rows = read_jsonl(sft_run / "metrics.jsonl")
    validation = [r for r in rows if "val/valid_json" in r]
    assert [r["step"] for r in validation] == [2]
    assert {"val/correct_format", "val/correct_tool", "val/args_reward"} <= validation[0].keys()
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]  # the step's own log survives validation
    metrics = json.loads((sft_run / "eval.json").read_text())["metrics"]
    assert {"valid_json", "correct_format", "correct_tool", "format_reward", "tool_reward", "args_reward",
            "length_penalty", "total"} <= metrics.keys()
    predictions = read_jsonl(sft_run / "eval_predictions.jsonl")
    assert predictions[0]["expected"].startswith("{")


def test_ppo_starts_from_the_sft_run(sft_run, tmp_path):
    out = tmp_path / "ppo"
    result = run_cli("ao_calib.run", "task=tool_json", "model=tiny_qwen3", "trainer=ppo",
                     f"trainer.init_from={sft_run}", "task.data.generate.n=120", "trainer.max_steps=2",
                     "trainer.batch_size=2", "trainer.ppo_epochs=2", "trainer.max_completion_length=16",
                     "trainer.logging_steps=1", "trainer.save_steps=2", "eval.num_samples=4", "eval.max_new_tokens=16",
                     "eval.initial=false", f"hydra.run.dir={out}")
    assert_ok(result)
    assert f"starting from the adapter in {sft_run / 'adapter'}" in result.stderr + result.stdout
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "ppo/value_loss" in r]
    assert [r["step"] for r in rows] == [1, 2] and PPO_METRICS <= rows[0].keys()
    for name in ("adapter/adapter_config.json", "adapter/value_head.safetensors",
                 "checkpoints/checkpoint-2/value_head.safetensors", "completions.jsonl", "eval.json"):
        assert (out / name).exists(), name
    # The KL reference is the SFT adapter, frozen beside the trained one.
    assert (out / "adapter" / "ref" / "adapter_config.json").exists()


def test_init_from_refuses_another_model(sft_run):
    cfg = compose_run_config(["task=tool_json", "model=tiny_gemma3", "trainer=ppo"])
    with pytest.raises(AOCalibError, match="trained with model.name=tiny_qwen3"):
        models.resolve_init_adapter(str(sft_run), cfg.model)
    with pytest.raises(AOCalibError, match="no adapter there"):
        models.resolve_init_adapter(str(sft_run / "checkpoints"), cfg.model)


def test_chained_sft_then_ppo_preset_and_the_eval_and_plot_clis(tmp_path):
    out = tmp_path / "chain"
    result = run_cli("ao_calib.run", "experiment=tool_json_sft_ppo_tiny", f"hydra.run.dir={out}")
    assert_ok(result)
    # this plumbing preset's budgets are short: the references over them are counted at start-up, printed, and
    # kept as alerts in the summary and the closing block
    alerts = json.loads((out / "summary.json").read_text())["alerts"]
    for name, key in (("references_over_eval_budget", "eval.max_new_tokens"),
                      ("references_over_rollout_budget", "trainer.max_completion_length")):
        assert alerts[name]["over"] > 0 and key in alerts[name]["message"]
        assert f"ALERT {name} (at start-up)" in result.stdout and f"[budget] {alerts[name]['over']} of" in result.stdout
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows if r["stage"] == "warmup" and "loss" in r] == [2, 4]
    ppo = [r for r in rows if r["stage"] == "train" and "ppo/policy_loss" in r]
    assert [r["step"] for r in ppo] == [1, 2, 3, 4] and PPO_METRICS <= ppo[0].keys()
    assert [r["step"] for r in rows if r["stage"] == "train" and "val/valid_json" in r] == [2]
    for name in ("eval_initial.json", "eval_warmup.json", "eval.json", "summary.json"):
        assert (out / name).exists(), name
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"

    result = run_cli("ao_calib.eval", f"run_dir={out}", "num_samples=4", "tag=cli")
    assert_ok(result)
    metrics = json.loads((out / "eval_cli.json").read_text())["metrics"]
    assert {"valid_json", "correct_format", "correct_tool", "total"} <= metrics.keys()
    assert "valid_json" in result.stdout and "expected" in result.stdout.lower()

    assert_ok(run_cli("ao_calib.plot", str(out)))
    assert (out / "plots" / "training_curves.png").exists()


@pytest.mark.parametrize("trainer", ["rloo", "grpo"])
def test_group_trainers_take_the_tool_json_task(trainer, tmp_path):
    trainer_obj, _ = build_trainer_from_config(
        tmp_path, base=["task=tool_json", "model=tiny_qwen3", f"trainer={trainer}", "task.data.generate.n=60",
                        "trainer.batch_size=2", "trainer.num_generations=2", "trainer.max_steps=1",
                        "trainer.max_completion_length=8", "trainer.save_steps=100"])
    trainer_obj.train()
    logged = read_jsonl(tmp_path / "metrics.jsonl")
    assert any("rewards/args_reward/mean" in r for r in logged)
    samples = read_jsonl(tmp_path / "completions.jsonl")
    assert samples and {"format_reward", "tool_reward", "args_reward", "length_penalty"} == samples[0]["rewards"].keys()


def test_multi_turn_episodes_from_warm_up_to_evaluation(tmp_path):
    """task.episode=multi_turn on the tiny Qwen3: an SFT warm-up on whole trajectories, GRPO with the tools inside
    its rollouts, and an evaluation of whole episodes, each prediction carrying its episode and the closing figures
    the tool use (the untrained model calls nothing: the figures are counted, not good)."""
    out = tmp_path / "multi"
    result = run_cli("ao_calib.run", "task=tool_json", "model=tiny_qwen3", "task.episode=multi_turn",
                     "trainer=grpo", "reward=tool_json_episode", "warmup=sft", "warmup.max_steps=2",
                     "warmup.batch_size=2", "warmup.save_steps=2", "task.data.generate.n=40", "trainer.max_steps=1",
                     "trainer.batch_size=2", "trainer.num_generations=2", "trainer.max_completion_length=24",
                     "trainer.save_steps=1", "eval.num_samples=4", "eval.max_new_tokens=24", "eval.initial=false",
                     "eval.after_warmup=false", f"hydra.run.dir={out}")
    assert_ok(result)
    closing = result.stdout[result.stdout.rindex("calls/need") - 200:]
    assert all(head in closing for head in ("silent", "calls/none", "tool err", "JSON/turn"))
    metrics = json.loads((out / "eval.json").read_text())
    assert metrics["headline_metric"] == "answer_correct"
    assert {"answer_correct", "episode_reward", "tool_calls", "call_rate_needed", "call_rate_not_needed",
            "valid_json", "turns"} <= metrics["metrics"].keys()
    predictions = read_jsonl(out / "eval_predictions.jsonl")
    assert len(predictions) == 4 and all(p["episode"][0]["role"] == "assistant" for p in predictions)
    assert all(p["completion"] == [m for m in p["episode"] if m["role"] == "assistant"][-1]["content"]
               for p in predictions)
    assert any(r.get("rewards/episode_reward/mean") is not None for r in read_jsonl(out / "metrics.jsonl"))
    # the control: the same episodes with tools that return nothing
    silent = read_jsonl(out / "eval_predictions_silent_tools.jsonl")
    assert len(silent) == 4 and "silent_tools" in metrics["variants"]
    assert all(m["content"] == "" for p in silent for m in p["episode"] if m["role"] == "tool")
