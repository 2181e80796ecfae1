"""GRPO through the steering hooks: every pass injects its rows' own activations, through shuffling and splits."""

from __future__ import annotations

import pytest
import trl.trainer.grpo_trainer as grpo_module
from ao_calib.steering import SteeringError
from ao_calib.trainers.callbacks import MetricsFileCallback
from tests.helpers.trainers import build

PPO_OVERRIDES = ["task=oracle", "model=tiny_qwen3", "trainer=ppo", "judge=label",
                 "task.data.generate.n_train_prompts=24", "task.data.generate.n_test_prompts=8",
                 "task.data.generate.questions_per_prompt=2", "task.activations.positions=window",
                 "task.activations.window_min=1", "task.activations.window_max=6", "trainer.batch_size=4",
                 "trainer.micro_batch_size=2", "trainer.ppo_epochs=2", "trainer.max_steps=2",
                 "trainer.max_completion_length=8", "trainer.save_steps=1000"]


def test_every_pass_injects_at_placeholders_through_shuffles_and_splits(tmp_path):
    trainer, steering = build(tmp_path)
    assert {len(v) for v in steering.vectors(trainer.train_dataset)} != {1}  # K really varies between rows
    trainer.train()
    stats = steering.stats
    # 8 completions a step in micro-batches of 2: 4 accumulation steps; a generation serves 2 iterations (8 micro-
    # steps), so 3 optimiser steps = 12 loss passes over 2 generations. Each generation is scored twice (old-policy
    # and reference log-probs), in chunks of 2 rows: 2 x 2 x 4 = 16 scoring passes.
    assert (stats["generation_batches"], stats["loss_batches"], stats["scoring_batches"]) == (2, 12, 16)
    assert stats["checked_rows"] == 2 * 8 + 12 * 2 + 16 * 2  # every row of every pass was checked
    rows = {r for r in MetricsFileCallback.of(trainer).last}
    assert {"calibration/brier", "calibration/confidence_std", "advantage_std", "calibration/parse_failure_rate",
            "calibration/informativeness", "calibration/answer_length", "kl"} <= rows


def test_ppo_injects_at_placeholders_in_every_pass_too(tmp_path):
    trainer, steering = build(tmp_path, base=PPO_OVERRIDES)
    assert type(trainer).__name__ == "SteeredPPOTrainer"
    trainer.train()
    stats = steering.stats
    # One batch of 4 rollouts serves both PPO epochs (2 optimiser steps of 2 micro-batches: 4 loss passes). It is
    # scored by TRL's old-policy and reference passes in chunks of 2 rows, and once whole for the critic's values.
    assert (stats["generation_batches"], stats["loss_batches"], stats["scoring_batches"]) == (1, 4, 5)
    assert stats["checked_rows"] == 4 + 4 * 2 + 4 * 2 + 4
    logged = MetricsFileCallback.of(trainer).last
    assert {"ppo/value_loss", "ppo/explained_variance", "calibration/brier"} <= logged.keys()


def test_the_check_catches_rows_separated_from_their_activations(tmp_path, monkeypatch):
    original = grpo_module.shuffle_sequence_dict

    def shuffle_but_lose_alignment(batch):
        batch = original(batch)
        for key in ("steer_vectors", "steer_positions"):
            batch[key] = batch[key].roll(1, dims=0)
        return batch

    monkeypatch.setattr(grpo_module, "shuffle_sequence_dict", shuffle_but_lose_alignment)
    trainer, _ = build(tmp_path)
    with pytest.raises(SteeringError, match="placeholder"):
        trainer.train()


def test_vllm_is_refused_for_the_oracle(tmp_path):
    from ao_calib.core.errors import AOCalibError

    with pytest.raises(AOCalibError, match="vLLM cannot run the activation-steering hooks"):
        build(tmp_path, ["trainer.use_vllm=true"])
