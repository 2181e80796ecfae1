"""The trainers' settings: one schema per trainer (``trainer=grpo|rloo|ppo``, ``warmup=sft|format``), each field with
its default, help text and allowed values (``ao_calib.core.settings.setting``). This module imports nothing heavy:
composing a config and ``--help`` stay fast; ``ao_calib.config`` registers these schemas with Hydra."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from omegaconf import MISSING

from ao_calib.core.settings import Checked, above, at_least, default_of, setting, within
from ao_calib.models.config import LoraOverrideConfig


class LMHead(str, Enum):
    """How a training pass turns the last hidden states into per-token log-probabilities (ao_calib.trainers.lm_head)."""

    auto = "auto"  # full where TRL's fused head has no Triton kernel (anything but CUDA and XPU), fused there
    fused = "fused"  # TRL's fused chunked head, as TRL installs it
    full = "full"  # the logits of the scored positions, then log_softmax


@dataclass
class TrainerConfig(Checked):
    """What every training stage (``trainer`` and ``warmup``) sets."""

    _target_: str = setting(MISSING, "The function that builds this stage's trainer (see "
                            "ao_calib.trainers.TrainerBuilder).")
    name: str = setting(MISSING, "The trainer's name (grpo, rloo, ppo, sft; format for the format warm-up).")
    lr: float = setting(1e-5, "Learning rate.", allowed=above(0))
    max_steps: int = setting(1000, "Optimiser steps of this stage.", allowed=at_least(1))
    lr_scheduler_type: str = setting("constant", "transformers' learning-rate schedule (constant, linear, cosine, "
                                     "...).")
    warmup_steps: float = setting(0.0, "Learning-rate warm-up: optimiser steps, or a fraction of max_steps when "
                                  "below 1.", allowed=at_least(0))
    weight_decay: float = setting(0.0, "AdamW weight decay.", allowed=at_least(0))
    max_grad_norm: float = setting(1.0, "Gradient clipping norm.", allowed=above(0))
    logging_steps: int = setting(1, "Log a metrics row every this many optimiser steps.", allowed=at_least(1))
    save_steps: int = setting(100, "Save a checkpoint every this many optimiser steps.", allowed=at_least(1))
    save_total_limit: Optional[int] = setting(3, "Checkpoints kept (the oldest are deleted); null: all.",
                                              allowed=at_least(1))
    seed: int = setting(42, "Seed of LoRA initialisation, data sampling and the trainer.")
    resume_from_checkpoint: Optional[str] = setting(None, "null | \"latest\" (the newest checkpoint in this run "
                                                    "directory) | a checkpoint path.")
    init_from: Optional[str] = setting(None, "A finished run directory (or adapter directory) whose adapter this run "
                                       "starts from and trains further, e.g. PPO from an SFT run; the model must be "
                                       "the same. null: a new LoRA (or the task's pretrained adapter).")
    lora: LoraOverrideConfig = setting(factory=LoraOverrideConfig, help="Per-run LoRA choices; null keeps the "
                                       "model config's value.")
    lm_head: LMHead = setting(
        LMHead.auto, "How the training passes score tokens: fused (TRL's fused LM head, no full logits: saves memory "
        "on a GPU), full (the logits of the scored positions only, then log_softmax: faster on a CPU) or auto (fused "
        "on CUDA and XPU, full elsewhere). See docs/performance.md.")


class ConfidenceLoss(str, Enum):
    """How an SFT stage learns the number NN of its targets' ``[epistemic status: NN]`` tags."""

    cross_entropy = "cross_entropy"  # the target's digits, like every other token
    # the distribution of the number's first token, scored by the calibration reward's own penalty against the
    # model's chance of being right (ao_calib.trainers.calibration_loss)
    calibration = "calibration"


class CalibrationLossForm(str, Enum):
    """The form of ``confidence_loss=calibration``'s term (ao_calib.trainers.calibration_loss.calibration_term)."""

    expected_penalty = "expected_penalty"  # the reward's penalty in expectation over the number's first token
    two_hot = "two_hot"  # cross-entropy against the two numbers that bracket the chance of being right


class PromptLengthPolicy(str, Enum):
    """What happens to a prompt over ``max_prompt_length`` tokens."""

    drop = "drop"  # the row is left out
    truncate = "truncate"  # its longest message keeps its first tokens, up to the limit


@dataclass
class OnlineTrainerConfig(TrainerConfig):
    """What every trainer that samples its own completions (GRPO, RLOO, PPO) sets. They always sample, so their
    temperature must be above 0."""

    batch_size: int = setting(4, "Prompts per generation batch.", allowed=at_least(1))
    micro_batch_size: Optional[int] = setting(None, "Completions per forward/backward pass; null: "
                                              "model.max_micro_batch_size, else the whole step at once.",
                                              allowed=at_least(1))
    max_completion_length: int = setting(256, "Most new tokens per sampled completion.", allowed=at_least(1))
    temperature: float = setting(0.7, "Sampling temperature of the rollouts.", allowed=above(0))
    top_p: float = setting(1.0, "Nucleus sampling of the rollouts.", allowed=within(0, 1, low_open=True))
    shuffle_dataset: bool = setting(True, "Shuffle the training prompts.")
    max_prompt_length: Optional[int] = setting(
        4096, "Prompts longer than this many tokens (chat template applied) are cut or left out by "
        "prompt_length_policy, counted and logged, in the training and held-out splits alike: one huge row must not "
        "run the machine out of memory. null: no limit.", allowed=at_least(1))
    prompt_length_policy: PromptLengthPolicy = setting(PromptLengthPolicy.drop, "A prompt over max_prompt_length: "
                                                       "drop (the row is left out) or truncate (its longest message "
                                                       "keeps its first tokens).")
    completions_logged_per_step: int = setting(4, "Sampled completions written to completions.jsonl per step.",
                                               allowed=at_least(0))
    fast_generation: bool = setting(False, "Rollouts through ao_calib.models.fast_generation (eval mode, a merged "
                                    "LoRA copy, one prefill per prompt; on CUDA a static KV cache and a compiled "
                                    "decode step); false: TRL's own generate path.")
    generation_merged_copy: bool = setting(True, "The fast path's merged copy owns a second set of the "
                                           "LoRA-targeted weights (about one model's size; frozen weights are "
                                           "shared). false generates from the unmerged adapter in eval mode, for "
                                           "models too big for both.")
    fast_generation_cache_shapes: int = setting(
        2, "Static KV caches the fast path keeps on CUDA, one per (batch, length) shape, each holding a whole "
        "rollout's keys and values. A new shape beyond this many evicts the least recently used one and compiles the "
        "decode step once (logged as fast_generation/compiles).", allowed=at_least(1))
    fast_generation_stop_check_every: int = setting(
        4, "Tokens the fast path decodes between checks for whether every completion has ended, on a GPU (each "
        "check waits for the device; up to this many minus one steps run past the last end). On CPU it checks at "
        "every token, where checking costs nothing.", allowed=at_least(1))


@dataclass
class GroupTrainerConfig(OnlineTrainerConfig):
    """Trainers whose baseline is a group of completions of the same prompt (GRPO, RLOO): a baseline needs at
    least two completions per prompt."""

    num_generations: int = setting(8, "Completions per prompt (the group).",
                                   allowed=at_least(2))
    beta: float = setting(0.1, "KL coefficient against the reference (the adapter-free model, or a copy of a "
                          "loaded adapter).", allowed=at_least(0))
    epsilon: float = setting(0.2, "Clip range of the policy ratio.", allowed=above(0))
    epsilon_high: Optional[float] = setting(None, "Upper clip range; null: the same as epsilon.", allowed=above(0))
    num_iterations: int = setting(1, "Optimisation passes per generated batch.", allowed=at_least(1))
    use_vllm: bool = setting(False, "Generate with vLLM (the vllm extra; not for tasks that inject activations).")
    greedy_member: bool = setting(
        False, "One completion of each group is decoded greedily (the answer an evaluation scores) and the others "
        "sampled, so the advantages compare the greedy answer with sampled ones. Not GRPO as published: the greedy "
        "completion is no sample of the policy. Needs trainer.fast_generation=true.")


@dataclass
class GRPOTrainerConfig(GroupTrainerConfig):
    """GRPO (TRL GRPOTrainer)."""

    _target_: str = "ao_calib.trainers.grpo.build_grpo_trainer"
    name: str = "grpo"
    loss_type: str = setting("dapo", "TRL's GRPO loss normalisation (dapo, grpo, dr_grpo, bnpo).")
    scale_rewards: str = setting("group", "TRL's reward scaling for advantages (group, batch, none).")
    shared_prefix: bool = setting(
        False, "The loss pass runs each distinct prompt of a micro-batch once and shares its KV cache with the "
        "prompt's completions (the same log-probs and gradients as TRL's pass): for long prompts, short completions. "
        "Not with gradient checkpointing, injected activations, FSDP, DeepSpeed. See docs/performance.md.")


@dataclass
class RLOOTrainerConfig(GroupTrainerConfig):
    """REINFORCE leave-one-out (TRL RLOOTrainer): each completion's baseline is its group's other completions."""

    _target_: str = "ao_calib.trainers.rloo.build_rloo_trainer"
    name: str = "rloo"
    beta: float = setting(0.05, "KL coefficient against the reference.", allowed=at_least(0))
    normalize_advantages: bool = setting(False, "Divide the advantages by their standard deviation.")


@dataclass
class PPOTrainerConfig(OnlineTrainerConfig):
    """PPO with a learned value head (ao_calib.trainers.ppo): one completion per prompt, GAE advantages, clipped
    policy and value losses, a per-token KL penalty to the reference folded into the reward. Steps count optimiser
    steps, as for every trainer: each batch of rollouts gives ``ppo_epochs * num_mini_batches`` of them."""

    _target_: str = "ao_calib.trainers.ppo.build_ppo_trainer"
    name: str = "ppo"
    # The tool-calling recipe's RL stage: lr 1e-5, batches of 8 rollouts, 128 new tokens, temperature
    # 1.0, 500 batches logged every 10 and saved every 100. A step here is an optimiser step, as for every
    # trainer, and each batch of rollouts gives ppo_epochs * num_mini_batches = 4 of them: hence 2000 steps,
    # logged every 40 and saved every 400.
    max_steps: int = setting(2000, "Optimiser steps (ppo_epochs * num_mini_batches per batch of rollouts).",
                             allowed=at_least(1))
    max_completion_length: int = setting(128, "Most new tokens per sampled completion.", allowed=at_least(1))
    temperature: float = setting(1.0, "Sampling temperature of the rollouts.", allowed=above(0))
    logging_steps: int = setting(40, "Log a metrics row every this many optimiser steps.", allowed=at_least(1))
    save_steps: int = setting(400, "Save a checkpoint every this many optimiser steps.", allowed=at_least(1))
    batch_size: int = setting(8, "Rollouts (prompts, one completion each) per batch.", allowed=at_least(1))
    ppo_epochs: int = setting(4, "Optimisation passes over each batch of rollouts.", allowed=at_least(1))
    num_mini_batches: int = setting(1, "Optimiser steps per pass.", allowed=at_least(1))
    kl_coef: float = setting(0.05, "Per-token KL penalty to the reference (the starting adapter), part of the "
                             "reward.", allowed=at_least(0))
    cliprange: float = setting(0.2, "Clip range of the policy ratio.", allowed=above(0))
    cliprange_value: float = setting(0.2, "Clip range of the value around the rollout-time value.", allowed=above(0))
    vf_coef: float = setting(0.1, "Value-loss weight in the total loss.", allowed=at_least(0))
    gamma: float = setting(1.0, "Discount factor.", allowed=within(0, 1))
    lam: float = setting(0.95, "GAE lambda.", allowed=within(0, 1))
    whiten_advantages: bool = setting(True, "Normalise the advantages of each batch to mean 0 and std 1.")


@dataclass
class SFTTrainerConfig(TrainerConfig):
    """Supervised fine-tuning on prompt -> completion pairs, loss on completion tokens only (TRL SFTTrainer)."""

    _target_: str = "ao_calib.trainers.sft.build_sft_trainer"
    name: str = "sft"
    max_steps: int = setting(800, "Optimiser steps of this stage.", allowed=at_least(1))
    batch_size: int = setting(8, "Rows per optimiser step.", allowed=at_least(1))
    micro_batch_size: Optional[int] = setting(None, "Rows per forward/backward pass; null: "
                                              "model.max_micro_batch_size, else the whole step at once.",
                                              allowed=at_least(1))
    max_length: int = setting(512, "Longest row in tokens (prompt and completion).", allowed=at_least(1))
    save_steps: int = setting(200, "Save a checkpoint every this many optimiser steps.", allowed=at_least(1))
    logging_steps: int = setting(50, "Log a metrics row every this many optimiser steps.", allowed=at_least(1))
    lr_scheduler_type: str = setting("linear", "transformers' learning-rate schedule (constant, linear, cosine, ...).")
    confidence_in_loss: bool = setting(
        True, "Whether the digits NN of a target's \"[epistemic status: NN]\" tag are in the loss. false: the stage "
        "teaches the tag's form and the answer and leaves the number to the model and the RL stage (random target "
        "numbers would only add noise).")
    tag_loss_fraction: float = setting(
        1.0, "The fraction of rows (chosen per row, seeded by trainer.seed) whose whole tag \"[epistemic status: NN] "
        "\" is in the loss; the others learn their answer alone. A few rows teach the tag; below 1 keeps the loss on "
        "the tokens that carry the answer. See docs/concepts/oracle.md.", allowed=within(0, 1))
    confidence_loss: ConfidenceLoss = setting(
        ConfidenceLoss.cross_entropy, "How the tag's number is learned. cross_entropy: its digits are targets like "
        "any token. calibration: that cross-entropy plus the calibration penalty on the number's first token, in "
        "expectation over the model's distribution, against its probability of the row's answer. See "
        "docs/concepts/oracle.md.")
    calibration_loss_weight: float = setting(1.0, "Weight of confidence_loss=calibration's term beside the "
                                             "cross-entropy (which is a mean over tokens; the term a mean over "
                                             "rows).", allowed=above(0))
    calibration_loss_start: float = setting(
        0.0, "The share of the stage's max_steps before confidence_loss=calibration's term joins the loss (0: from "
        "the first step); until then the number learns by cross-entropy alone. Started before the model reads, the "
        "term settles on one number for every row.",
        allowed=within(0, 1, high_open=True))
    calibration_loss_form: CalibrationLossForm = setting(
        CalibrationLossForm.expected_penalty, "The form of confidence_loss=calibration's term: expected_penalty "
        "(sum_d p(d)·(value(d) − c)², the reward's penalty in expectation; its gradient vanishes once one number has "
        "all the mass) or two_hot (cross-entropy against the two numbers that bracket 100c). See "
        "docs/concepts/oracle.md.")
    calibration_greedy: bool = setting(
        False, "With confidence_loss=calibration: c is whether greedy decoding gets the row's answer right (each "
        "token the most likely one, teacher-forced) instead of the answer's probability, since evaluation decodes "
        "greedily.")
    calibration_expected_over_draw: bool = setting(
        False, "With confidence_loss=calibration, on rows whose label was drawn uniformly from named answers "
        "(answer_drawn_from, e.g. a coin-flip Yes/No), c is the model's mean probability of those answers: the same "
        "target without the draw's noise. false: the drawn label's probability.")

    def __post_init__(self):
        super().__post_init__()
        if self.confidence_loss != ConfidenceLoss.calibration:  # keys of the calibration term alone, off their default
            for key, why, shown in (
                    ("calibration_expected_over_draw", "it changes the calibration term's c", "true"),
                    ("calibration_loss_form", "it is the calibration term's form",
                     CalibrationLossForm(self.calibration_loss_form).value),
                    ("calibration_greedy", "it changes the calibration term's c", "true")):
                if getattr(self, key) != default_of(type(self), key):
                    raise ValueError(f"{key}={shown}: out of range with confidence_loss="
                                     f"{ConfidenceLoss(self.confidence_loss).value} ({why}); set "
                                     "confidence_loss=calibration")
        if self.confidence_loss == ConfidenceLoss.calibration and not self.confidence_in_loss:
            raise ValueError("confidence_loss=calibration: out of range with confidence_in_loss=false (the drawn "
                             "number's cross-entropy is its prior); allowed cross_entropy, or set "
                             "confidence_in_loss=true")


@dataclass
class SFTWarmupConfig(SFTTrainerConfig):
    """``warmup=sft``: an SFT stage before the main trainer, on the same adapter: shorter and faster than
    ``trainer=sft``, saved only at its end."""

    max_steps: int = setting(200, "Optimiser steps of this stage.", allowed=at_least(1))
    lr: float = setting(1e-4, "Learning rate.", allowed=above(0))
    save_steps: int = setting(100000, "Save a checkpoint every this many optimiser steps (the default: at the "
                              "stage's end only).", allowed=at_least(1))
    logging_steps: int = setting(10, "Log a metrics row every this many optimiser steps.", allowed=at_least(1))
    enabled: bool = setting(True, "false: the stage is skipped, e.g. to drop a preset's warm-up and start the "
                            "trainer from a saved one (trainer.init_from=RUN_DIR/checkpoints/warmup/checkpoint-N).")


class WarmupConfidence(str, Enum):
    """Where a format warm-up's confidence tags come from."""

    auto = "auto"  # kind_mean when the run has a judge, else spread
    # 100 × the judge's mean informativeness of the model's own answers to questions of the same kind: the hit
    # rate the model could know before answering, a calibrated start
    kind_mean = "kind_mean"
    # 100 × the judge's informativeness of that very answer. With a yes/no judge this tags each answer with its
    # own correctness (5 or 95), which the model cannot know before answering: it learns a two-valued confidence
    # that does not track being right (BENCHMARKS.md, the seed path)
    judge = "judge"
    spread = "spread"  # drawn from the task's spread of confidences, independent of the answer


@dataclass
class FormatWarmupConfig(SFTWarmupConfig):
    """``warmup=format``: the model answers the training questions itself (greedy, with the task's steering), each
    answer is tagged ``[epistemic status: NN]``, and a short SFT teaches the tag while the answers stay the model's
    own. Needs no reference answers, so it works on judge-only data (WildChat). Tasks opt in through
    ``Task.warmup_data``."""

    name: str = "format"
    max_steps: int = setting(100, "Optimiser steps of this stage.", allowed=at_least(1))
    save_steps: int = setting(200, "Save a checkpoint every this many optimiser steps.", allowed=at_least(1))
    logging_steps: int = setting(50, "Log a metrics row every this many optimiser steps.", allowed=at_least(1))
    confidence: WarmupConfidence = setting(
        WarmupConfidence.auto, "Where the tags' numbers come from: kind_mean (100 × the judge's mean informativeness "
        "of the model's answers to questions of the same kind: a calibrated start), judge (100 × that answer's own "
        "informativeness), spread (drawn from the task's spread) or auto (kind_mean with a judge, else spread).")
    confidence_jitter: int = setting(
        10, "kind_mean tags are whole tens, moved by a multiple of 10 drawn uniformly from [-jitter, jitter] and "
        "clipped to 0-100: calibrated per kind on average and varied, so the completions of a group state different "
        "numbers and GRPO has something to compare.",
        allowed=within(0, 100))
    num_questions: Optional[int] = setting(None, "Training questions answered for the targets; null: all of them.",
                                           allowed=at_least(1))
    max_new_tokens: int = setting(64, "Length of each own answer.", allowed=at_least(1))
    generation_batch_size: int = setting(16, "Questions answered per generation batch.", allowed=at_least(1))
