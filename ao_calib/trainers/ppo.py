"""PPO with a learned critic, on TRL's GRPOTrainer machinery (TRL 1.16 ships no PPOTrainer).

GRPOTrainer already samples, scores with the reward functions, keeps the reference log-probs (a frozen copy of a
loaded adapter, or the adapter-free model), buffers a generation batch over several optimiser steps
(``num_iterations`` passes, ``steps_per_generation`` mini-batches) and logs. This subclass samples one completion
per prompt and replaces the group baseline with a value head on the policy's final hidden states:

* rollout: per-token reward = −β·(log π_old − log π_ref) at every completion token, plus the task's weighted
  reward at the last one; advantages by GAE(γ, λ) over completion tokens, whitened over the batch;
* loss: clipped policy-ratio loss + ``vf_coef`` · clipped value loss, for ``ppo_epochs`` passes per batch.

Logged under ``ppo/``: policy_loss, value_loss, clip_fraction, value_clip_fraction, approx_kl (new vs rollout
policy), kl (to the reference, summed over a completion), explained_variance, score, value, return.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from trl import GRPOConfig
from trl.models.utils import disable_gradient_checkpointing

from ao_calib.core.errors import AOCalibError
from ao_calib.runs.run_dir import RunDir
from ao_calib.trainers.base import AOGRPOTrainer
from ao_calib.trainers.common import (BackboneStates, TrainerSetup, build_online_trainer, peft_base, sampling_kwargs,
                                      stage_batches, training_kwargs)
from ao_calib.trainers.config import PPOTrainerConfig
from ao_calib.trainers.steering import SteeringMixin

log = logging.getLogger(__name__)

VALUE_HEAD = "ppo_value_head"
VALUE_HEAD_FILE = RunDir.VALUE_HEAD


@dataclass
class PPOConfig(GRPOConfig):
    """GRPOConfig plus the critic's settings. ``beta`` is the per-token KL coefficient, ``epsilon`` the policy
    clip range and ``num_iterations`` the PPO epochs."""

    vf_coef: float = field(default=0.1, metadata={"help": "Weight of the value loss."})
    cliprange_value: float = field(default=0.2, metadata={"help": "Clip range of the value around its rollout value."})
    gamma: float = field(default=1.0, metadata={"help": "Discount factor."})
    lam: float = field(default=0.95, metadata={"help": "GAE lambda."})
    whiten_advantages: bool = field(default=True, metadata={"help": "Normalise advantages over each batch."})

    def __post_init__(self):
        # GRPOConfig demands a group of >= 2 completions per prompt for its baseline; PPO's baseline is the critic.
        # Validate with a group that divides the generation batch, then sample once per prompt.
        rows = self.per_device_train_batch_size * (self.steps_per_generation or self.gradient_accumulation_steps)
        if rows < 2:
            raise ValueError("PPO needs at least 2 rollouts per generation batch")
        self.num_generations = rows
        super().__post_init__()
        self.num_generations = 1


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns over the masked (completion) tokens of each row; the value
    after a row's last token is 0 (the episode ends there)."""
    values = values * mask
    rewards = rewards * mask
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    length = rewards.size(1)
    for t in reversed(range(length)):
        next_value = values[:, t + 1] if t + 1 < length else torch.zeros_like(running)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running) * mask[:, t]
        advantages[:, t] = running
    return advantages, (advantages + values) * mask


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 − Var(returns − values) / Var(returns) over masked tokens: 1 is a perfect critic, ≤ 0 a useless one."""
    var_returns = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    residual = returns - values
    var_residual = masked_mean((residual - masked_mean(residual, mask)) ** 2, mask)
    return float(1.0 - var_residual / var_returns) if var_returns > 0 else float("nan")


class PPOTrainer(AOGRPOTrainer):
    """PPO on GRPOTrainer's sampling, reward and reference machinery; see the module docstring."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.use_vllm:
            raise AOCalibError("trainer=ppo generates with the training model; vLLM is not supported")
        model = self.accelerator.unwrap_model(self.model)
        base = peft_base(model)
        # TRL's fused log-prob forward runs this backbone then the LM head; its output is the critic's input.
        self._backbone = base.base_model
        hidden = base.config.get_text_config().hidden_size
        head = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
        # A submodule of the trained model, so the optimiser, gradient clipping and device moves include it.
        model.add_module(VALUE_HEAD, head.to(next(model.parameters()).device))
        self._rollout_rewards: torch.Tensor | None = None

    @property
    def value_head(self) -> torch.nn.Linear:
        return getattr(self.accelerator.unwrap_model(self.model), VALUE_HEAD)

    # ---------------------------------------------------------------------------------------------- rollouts

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rollout_rewards = rewards  # every process's rows; sliced to this process's in _after_scoring
        return rewards

    def _logps_and_values(self, model, input_ids, attention_mask, logits_to_keep: int, compute_entropy=False):
        """Per-token log-probs of the completion tokens under ``model`` and the critic's value of the state before
        each of them, from one forward pass."""
        with BackboneStates(self._backbone) as states:
            logps, entropies, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, compute_entropy=compute_entropy)
        # the position that predicts each completion token
        hidden = torch.cat(states.outputs)[:, -logits_to_keep - 1:-1]
        values = self.value_head(hidden.float()).squeeze(-1)
        return logps, values, entropies

    def _after_scoring(self, output: dict) -> dict:
        completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
        input_ids = torch.cat([output["prompt_ids"], completion_ids], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], completion_mask], dim=1)
        length = completion_ids.size(1)
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            old_logps, old_values, _ = self._logps_and_values(self.model, input_ids, attention_mask, length)

        n = completion_ids.size(0)
        start = self.accelerator.process_index * n
        per_func = self._rollout_rewards[start:start + n].to(old_logps.device)
        scorable = ~torch.isnan(per_func).all(dim=1)  # a sample every reward masked (e.g. judge failure) is skipped
        scores = (per_func * self.reward_weights.to(per_func.device)).nansum(dim=1)
        mask = completion_mask.float() * scorable.unsqueeze(1)

        ref_logps = output.get("ref_per_token_logps")
        kl = (old_logps - ref_logps) * mask if ref_logps is not None else torch.zeros_like(old_logps)
        rewards = -self.beta * kl
        last = (completion_mask.sum(dim=1) - 1).clamp(min=0)
        rewards[torch.arange(n, device=rewards.device), last] += torch.where(scorable, scores, 0.0)

        advantages, returns = gae(rewards, old_values, mask, self.args.gamma, self.args.lam)
        if self.args.whiten_advantages:
            advantages = masked_whiten(advantages, mask)

        metrics = self._metrics["train"]
        metrics["ppo/score"].append(scores[scorable].mean().item() if scorable.any() else float("nan"))
        metrics["ppo/kl"].append(((kl.sum(dim=1) * scorable).sum() / scorable.sum().clamp(min=1)).item())
        metrics["kl"].append(masked_mean(kl, mask).item())
        metrics["ppo/explained_variance"].append(explained_variance(old_values, returns, mask))
        metrics["ppo/value"].append(masked_mean(old_values, mask).item())
        metrics["ppo/return"].append(masked_mean(returns, mask).item())
        metrics["ppo/masked_samples"].append(float((~scorable).sum().item()))
        # Whitened advantages keep a spread of 1 even when every rollout scores alike: the no-learning-signal alert
        # reads the scores' own spread here.
        metrics["reward_spread"].append(scores[scorable].std().item() if scorable.sum() > 1 else 0.0)

        output.update(advantages=advantages, returns=returns, old_values=old_values,
                      old_per_token_logps=old_logps, ppo_mask=mask)
        return output

    def _sample_advantages(self, output: dict) -> list[float]:
        mask = output["ppo_mask"]
        return ((output["advantages"] * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()

    # -------------------------------------------------------------------------------------------------- loss

    def _compute_loss(self, model, inputs):
        completion_ids = inputs["completion_ids"]
        input_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        logps, values, entropies = self._logps_and_values(model, input_ids, attention_mask, completion_ids.size(1),
                                                          compute_entropy=True)
        mask, advantages, returns = inputs["ppo_mask"], inputs["advantages"], inputs["returns"]
        old_logps, old_values = inputs["old_per_token_logps"], inputs["old_values"]

        ratio = torch.exp(logps - old_logps)
        clipped_ratio = torch.clamp(ratio, 1 - self.epsilon_low, 1 + self.epsilon_high)
        policy_loss = masked_mean(torch.max(-advantages * ratio, -advantages * clipped_ratio), mask)

        clipped_values = old_values + torch.clamp(values - old_values, -self.args.cliprange_value,
                                                  self.args.cliprange_value)
        value_losses = torch.max((values - returns) ** 2, (clipped_values - returns) ** 2)
        value_loss = 0.5 * masked_mean(value_losses, mask)

        loss = (policy_loss + self.args.vf_coef * value_loss) / self.current_gradient_accumulation_steps

        mode = "train" if self.model.training else "eval"
        metrics = self._metrics[mode]
        with torch.no_grad():
            metrics["ppo/policy_loss"].append(policy_loss.item())
            metrics["ppo/value_loss"].append(value_loss.item())
            metrics["ppo/clip_fraction"].append(masked_mean(((ratio - 1).abs() > self.epsilon_high).float(),
                                                            mask).item())
            metrics["ppo/value_clip_fraction"].append(
                masked_mean(((values - old_values).abs() > self.args.cliprange_value).float(), mask).item())
            metrics["ppo/approx_kl"].append(masked_mean(0.5 * (logps - old_logps) ** 2, mask).item())
            metrics["entropy"].append(masked_mean(entropies, mask).item())
        return loss

    # ------------------------------------------------------------------------------------ saving the critic

    def _save(self, output_dir: str | None = None, state_dict=None):
        super()._save(output_dir, state_dict)
        if not self.args.should_save:  # transformers calls _save on every process; the main one writes
            return
        from safetensors.torch import save_file

        head = self.value_head
        save_file({k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()},
                  str(Path(output_dir or self.args.output_dir) / VALUE_HEAD_FILE))

    def load_own_state(self, checkpoint: str) -> None:
        """The critic saved beside a checkpoint's adapter (transformers loads the adapter; ``stage.load_checkpoint``
        and a resumed stage call this)."""
        path = Path(checkpoint) / VALUE_HEAD_FILE
        if not path.is_file():
            log.warning("%s has no %s: the critic restarts from zero", checkpoint, VALUE_HEAD_FILE)
            return
        from safetensors.torch import load_file

        head = self.value_head
        head.load_state_dict({k: v.to(head.weight.device) for k, v in load_file(str(path)).items()})


def build_ppo_config(setup: TrainerSetup, t: PPOTrainerConfig, stage_name: str = "train") -> PPOConfig:
    micro, accumulation = stage_batches(setup.model_config, t)  # a mini-batch of rollouts per optimiser step
    return PPOConfig(
        **training_kwargs(setup, t, stage_name),
        **sampling_kwargs(setup, t),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=t.num_mini_batches * accumulation,  # one generation batch: batch_size rollouts in all
        num_iterations=t.ppo_epochs,
        beta=t.kl_coef,
        epsilon=t.cliprange,
        epsilon_high=t.cliprange,
        scale_rewards="none",
        vf_coef=t.vf_coef,
        cliprange_value=t.cliprange_value,
        gamma=t.gamma,
        lam=t.lam,
        whiten_advantages=t.whiten_advantages,
    )


class SteeredPPOTrainer(SteeringMixin, PPOTrainer):
    """PPO whose every pass (generation, rollout log-probs and values, reference, loss) injects each row's
    activations: the mixin's hooks wrap PPOTrainer's passes."""


def build_ppo_trainer(setup: TrainerSetup, stage: PPOTrainerConfig, stage_name: str, callbacks: list) -> PPOTrainer:
    if stage.batch_size < 2:
        raise AOCalibError("trainer.batch_size must be at least 2 for trainer=ppo (whitened advantages need a batch)")
    args = build_ppo_config(setup, stage, stage_name)
    if setup.steering is None:
        return build_online_trainer(PPOTrainer, setup, stage, args, callbacks)
    return build_online_trainer(SteeredPPOTrainer, setup, stage, args, callbacks, steering=setup.steering)
