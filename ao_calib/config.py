"""Structured config schemas, registered in Hydra's ConfigStore.

Every YAML file in ``conf/<group>/`` starts from one of these schemas (``defaults: [<schema>]``), and the
top-level ``Config`` types each group, so Hydra rejects a misspelt key or a wrongly typed value at start-up
and names it (e.g. ``Key 'lrr' not in 'GRPOTrainerConfig'``).
This module imports nothing heavy: composing a config and ``--help`` stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# ---------------------------------------------------------------------------------------------- model


@dataclass
class LoraConfig:
    """LoRA adapter settings (peft). ``layers`` limits LoRA to the last N decoder layers (the seed's --lora-layers)."""

    rank: int = 64
    alpha: int = 128
    dropout: float = 0.05
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    layers: Optional[int] = None


@dataclass
class TinyModelConfig:
    """A random-initialised stand-in of the real architecture, built locally (see ao_calib.tiny_models).
    ``vocab_size`` is the model's embedding size and the BPE tokenizer's target size."""

    family: str = "qwen3"  # qwen3 | gemma3
    hidden_size: int = 64
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    vocab_size: int = 4096
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True  # Qwen3-8B unties them; the small Qwen3s and Gemma 3 tie
    sliding_window: int = 256  # Gemma 3's local-attention window (1024 in the real checkpoints)
    seed: int = 0


@dataclass
class ModelConfig:
    """Which base model to load and what the steering code needs to know about its layout."""

    name: str = MISSING
    hub_id: Optional[str] = None  # Hugging Face id or local path; null when ``tiny`` builds the model
    ao_lora_id: Optional[str] = None  # pretrained Activation Oracle LoRA (hub id or local path)
    dtype: str = "bfloat16"  # float32 | bfloat16 | float16
    attn_implementation: str = "sdpa"
    requires_gpu: bool = True
    gradient_checkpointing: bool = False
    num_hidden_layers: int = MISSING
    hidden_size: int = MISSING
    # Dotted path from the loaded model (before peft wrapping) to its decoder-layer ModuleList.
    decoder_layers_path: str = "model.layers"
    # Activation Oracle injection mode the adapter was trained with: add | replace.
    steering_mode: str = "add"
    chat_template_kwargs: dict[str, Any] = field(default_factory=lambda: {"enable_thinking": False})
    lora: LoraConfig = field(default_factory=LoraConfig)
    tiny: Optional[TinyModelConfig] = None


# ----------------------------------------------------------------------------------------------- task


@dataclass
class TaskConfig:
    name: str = MISSING


@dataclass
class GeneratedDataConfig:
    """Settings of the offline data generator used when no data files are given."""

    n_train: int = 512
    n_test: int = 64
    seed: int = 0


@dataclass
class FunctionCallDataConfig:
    train_path: Optional[str] = None  # JSONL in the seed's format; null -> generated data
    test_path: Optional[str] = None
    generate: GeneratedDataConfig = field(default_factory=GeneratedDataConfig)
    max_train_samples: Optional[int] = None


@dataclass
class TaskCalibrationConfig:
    """The epistemic tag and Brier term for a task whose own score is the informativeness. Active when the reward
    mix uses the calibrated reward (reward=calibrated_<task>): the prompt then asks for ``[epistemic status: NN]``
    and evaluation reports ECE/MCE/Brier."""

    lam: float = 0.5
    unparsed_margin: Optional[float] = 0.5
    instruction: str = ("\n\nBegin your reply with [epistemic status: NN], where NN (0-100) is your confidence "
                        "that your answer is exactly right, then give the answer.")


@dataclass
class FunctionCallTaskConfig(TaskConfig):
    name: str = "function_call"
    data: FunctionCallDataConfig = field(default_factory=FunctionCallDataConfig)
    calibration: TaskCalibrationConfig = field(default_factory=TaskCalibrationConfig)


@dataclass
class OracleGeneratedDataConfig:
    """The offline generator of prompts with known yes/no answers (tasks.oracle.synthetic)."""

    n_train_prompts: int = 400
    n_test_prompts: int = 100
    questions_per_prompt: int = 3
    kinds: list[str] = field(default_factory=lambda: ["topic", "mood", "city"])
    seed: int = 0


@dataclass
class OracleDataConfig:
    # The seed's WildChat oracle-questions format (hub id or local JSON/JSONL); answers unknown, so an LLM judge
    # (judge=litellm or judge=local) scores them. Takes precedence over train_path/test_path.
    path: Optional[str] = None
    strict: bool = False  # stop at the first bad row instead of reporting and skipping it
    test_fraction: float = 0.1  # prompts held out from `path` for evaluation
    # JSONL rows with prompt, question and answer ("Yes"/"No"); null -> generated data
    train_path: Optional[str] = None
    test_path: Optional[str] = None
    generate: OracleGeneratedDataConfig = field(default_factory=OracleGeneratedDataConfig)
    max_train_samples: Optional[int] = None


@dataclass
class OracleActivationsConfig:
    """Which activations of the target prompt the oracle reads (see ao_calib.activations.PositionRule)."""

    positions: str = "last_k"  # last_k | window | full
    k: int = 10
    window_min: int = 1
    window_max: int = 10
    batch_size: int = 16
    cache: bool = True


@dataclass
class ClassificationEvalConfig:
    """The reference's yes/no classification suite (tasks.oracle.classification), scored for accuracy and
    calibration in every oracle evaluation when enabled."""

    enabled: bool = False
    datasets: list[str] = field(default_factory=lambda: ["geometry_of_truth", "relations", "sst2", "md_gender", "snli",
                                                         "ag_news", "ner", "tense", "singular_plural"])
    data_dir: Optional[str] = None  # the reference repo's data files (gmt/, relations/, tense/, ...)
    n_per_dataset: int = 250
    seed: int = 0


@dataclass
class OracleAlertsConfig:
    """Failure-mode alerts during GRPO (see ao_calib.alerts); each fires once, after ``patience`` logged steps."""

    confidence_std_below: float = 0.1
    advantage_std_below: float = 1e-3
    answer_length_drop: float = 0.5
    kl_above: float = 1.0
    patience: int = 3


@dataclass
class OracleTaskConfig(TaskConfig):
    name: str = "oracle"
    layer_percents: list[int] = field(default_factory=lambda: [25, 50, 75])
    data: OracleDataConfig = field(default_factory=OracleDataConfig)
    activations: OracleActivationsConfig = field(default_factory=OracleActivationsConfig)
    injection_layer: int = 1
    steering_coefficient: float = 1.0
    lam: float = 0.5  # λ in informativeness − λ·(confidence/100 − informativeness)²
    # Reward of a completion without a valid tag: −λ − margin, below every tagged answer. null: the seed's rule
    # (confidence 50 in the formula), under which a broken tag beats a confidently wrong answer, and GRPO
    # learns to drop the tag.
    unparsed_margin: Optional[float] = 0.5
    # SFT targets carry a confidence drawn from these, independent of correctness: the warm-up teaches the
    # format, and calibration is left to GRPO.
    sft_confidences: list[int] = field(default_factory=lambda: [50, 60, 70, 80, 90, 100])
    # Also evaluate with activations of other prompts: the control showing the oracle reads its input.
    eval_control: bool = True
    alerts: OracleAlertsConfig = field(default_factory=lambda: OracleAlertsConfig())
    classification: ClassificationEvalConfig = field(default_factory=lambda: ClassificationEvalConfig())


@dataclass
class ToolJsonGeneratedDataConfig:
    n: int = 2000  # rows in all, before the validation split
    seed: int = 0
    val_fraction: float = 0.1


@dataclass
class ToolJsonDataConfig:
    # The seed's schema, as a JSON array or JSONL (tasks.tool_json.data); null -> generated data
    train_path: Optional[str] = None
    validation_path: Optional[str] = None
    generate: ToolJsonGeneratedDataConfig = field(default_factory=ToolJsonGeneratedDataConfig)


@dataclass
class ToolJsonTaskConfig(TaskConfig):
    name: str = "tool_json"
    data: ToolJsonDataConfig = field(default_factory=ToolJsonDataConfig)
    calibration: TaskCalibrationConfig = field(default_factory=TaskCalibrationConfig)


# --------------------------------------------------------------------------------------------- reward


@dataclass
class RewardPhaseConfig:
    """One curriculum phase: ``weights`` apply while the optimiser step is below ``until_step`` (null: to the end)."""

    until_step: Optional[int] = None
    weights: dict[str, float] = field(default_factory=dict)


@dataclass
class RewardConfig:
    """A weighted mix of the task's reward functions; the trained reward is the weighted sum."""

    name: str = MISSING
    weights: dict[str, float] = field(default_factory=dict)
    phases: list[RewardPhaseConfig] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- judge


@dataclass
class JudgeConfig:
    name: str = "none"


DEFAULT_JUDGE_PROMPT = (
    "You are grading an answer produced by a model that could not see the text below; it only saw internal "
    "activations computed from it.\n\n"
    "Text:\n<<<\n{prompt}\n>>>\n\n"
    "Question about the text: {question}\n"
    "Answer to grade: {answer}\n\n"
    "Score how informative and correct the answer is about the text, from 0 (wrong, empty or evasive) to 100 "
    "(correct and specific). A vague answer that is technically true scores low. Think briefly if needed, then "
    "end with a final line of the form 'SCORE: <0-100>'."
)


@dataclass
class LiteLLMJudgeConfig(JudgeConfig):
    """An LLM judge through litellm (any provider). API keys come from the provider's environment variable
    (e.g. OPENAI_API_KEY) and are never read from or written to configs."""

    name: str = "litellm"
    model: str = "openai/gpt-4o-mini"
    api_base: Optional[str] = None  # an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1
    prompt: str = DEFAULT_JUDGE_PROMPT
    temperature: float = 0.0
    max_tokens: int = 256
    max_concurrency: int = 16
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 1.0  # first retry delay; doubles each retry
    cache_dir: Optional[str] = "${paths.cache_dir}/judge"  # null: no disk cache


@dataclass
class LocalJudgeConfig(JudgeConfig):
    """The base model itself (adapter disabled) as an offline judge, with the same prompt."""

    name: str = "local"
    prompt: str = DEFAULT_JUDGE_PROMPT
    max_new_tokens: int = 64
    batch_size: int = 8


# -------------------------------------------------------------------------------------------- trainer


@dataclass
class LoraOverrideConfig:
    """Per-run LoRA choices; a null field keeps the model config's value."""

    rank: Optional[int] = None
    alpha: Optional[int] = None
    dropout: Optional[float] = None
    layers: Optional[int] = None


@dataclass
class TrainerConfig:
    name: str = MISSING
    lr: float = 1e-5
    max_steps: int = 1000
    lr_scheduler_type: str = "constant"
    warmup_steps: float = 0.0  # optimiser steps, or a fraction of max_steps when below 1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    logging_steps: int = 1
    save_steps: int = 100
    save_total_limit: Optional[int] = 3
    seed: int = 42
    # null | "latest" (the newest checkpoint in this run directory) | a checkpoint path
    resume_from_checkpoint: Optional[str] = None
    # A finished run directory (or adapter directory) whose adapter this run starts from and trains further,
    # e.g. PPO from an SFT run; the model must be the same. null: a new LoRA (or the task's pretrained adapter).
    init_from: Optional[str] = None
    lora: LoraOverrideConfig = field(default_factory=LoraOverrideConfig)


@dataclass
class OnlineTrainerConfig(TrainerConfig):
    """What every trainer that samples its own completions (GRPO, RLOO, PPO) sets."""

    batch_size: int = 4  # prompts per generation batch (seed --batch-size)
    micro_batch_size: Optional[int] = None  # completions per forward/backward; null = the whole step at once
    max_completion_length: int = 256
    temperature: float = 0.7
    top_p: float = 1.0
    shuffle_dataset: bool = True
    completions_logged_per_step: int = 4


@dataclass
class GroupTrainerConfig(OnlineTrainerConfig):
    """Trainers whose baseline is a group of completions of the same prompt (GRPO, RLOO)."""

    num_generations: int = 8  # completions per prompt, the group (seed --group-size)
    beta: float = 0.1  # KL coefficient against the reference (adapter-free model, or a copy of a loaded adapter)
    epsilon: float = 0.2
    epsilon_high: Optional[float] = None  # null -> same as epsilon
    num_iterations: int = 1  # optimisation passes per generated batch
    use_vllm: bool = False


@dataclass
class GRPOTrainerConfig(GroupTrainerConfig):
    """GRPO (TRL GRPOTrainer). Names follow the function-calling seed's CLI where it has one."""

    name: str = "grpo"
    loss_type: str = "dapo"
    scale_rewards: str = "group"


@dataclass
class RLOOTrainerConfig(GroupTrainerConfig):
    """REINFORCE leave-one-out (TRL RLOOTrainer): each completion's baseline is its group's other completions."""

    name: str = "rloo"
    beta: float = 0.05
    normalize_advantages: bool = False


@dataclass
class PPOTrainerConfig(OnlineTrainerConfig):
    """PPO with a learned value head (ao_calib.trainers.ppo): one completion per prompt, GAE advantages, clipped
    policy and value losses, a per-token KL penalty to the reference folded into the reward. Steps count optimiser
    steps, as for every trainer: each batch of rollouts gives ``ppo_epochs * num_mini_batches`` of them."""

    name: str = "ppo"
    batch_size: int = 8  # rollouts (prompts, one completion each) per batch
    ppo_epochs: int = 4  # optimisation passes over each batch of rollouts
    num_mini_batches: int = 1  # optimiser steps per pass
    kl_coef: float = 0.05  # per-token KL penalty to the reference (the starting adapter), part of the reward
    cliprange: float = 0.2  # policy ratio clip
    cliprange_value: float = 0.2  # value clip around the rollout-time value
    vf_coef: float = 0.1  # value-loss weight in the total loss
    gamma: float = 1.0
    lam: float = 0.95  # GAE lambda
    whiten_advantages: bool = True


@dataclass
class SFTTrainerConfig(TrainerConfig):
    """Supervised fine-tuning on prompt -> completion pairs, loss on completion tokens only (TRL SFTTrainer)."""

    name: str = "sft"
    lr: float = 1e-5
    max_steps: int = 800
    batch_size: int = 8
    micro_batch_size: Optional[int] = None
    max_length: int = 512
    save_steps: int = 200
    logging_steps: int = 50
    lr_scheduler_type: str = "linear"


# ------------------------------------------------------------------------------------- logger / paths


@dataclass
class LoggerConfig:
    name: str = "none"  # none | wandb
    project: str = "ao_calib"
    entity: Optional[str] = None
    # auto: online when WANDB_API_KEY is set (or wandb is logged in), offline otherwise
    mode: str = "auto"
    tags: list[str] = field(default_factory=list)
    init_timeout_s: float = 60.0


@dataclass
class PathsConfig:
    root_dir: str = MISSING
    output_dir: str = MISSING
    cache_dir: str = MISSING


@dataclass
class EvalConfig:
    enabled: bool = True
    initial: bool = True  # also evaluate before training (the seed's --no_initial_eval is eval.initial=false)
    after_warmup: bool = True  # evaluate after the warm-up stage too (eval_warmup.json)
    every_steps: Optional[int] = None  # also evaluate during training (val/<metric> in metrics.jsonl)
    during_num_samples: int = 50  # held-out samples for those evaluations
    num_samples: Optional[int] = None  # null: the whole held-out split
    batch_size: int = 16
    max_new_tokens: Optional[int] = None  # null: the trainer's max_completion_length
    # null (or 0): greedy decoding. A temperature samples instead (from ``seed``, the same draws every evaluation): the
    # policy an RL trainer optimises when it samples at that temperature.
    temperature: Optional[float] = None
    seed: int = 0
    mismatches_printed: int = 3


@dataclass
class Config:
    task: TaskConfig = MISSING
    model: ModelConfig = MISSING
    trainer: TrainerConfig = MISSING
    reward: RewardConfig = MISSING
    judge: JudgeConfig = MISSING
    logger: LoggerConfig = MISSING
    paths: PathsConfig = MISSING
    eval: EvalConfig = field(default_factory=EvalConfig)
    # An SFT stage run before ``trainer`` on the same adapter (e.g. format warm-up before GRPO); null: none.
    warmup: Optional[SFTTrainerConfig] = None
    run_name: str = "${task.name}-${model.name}-${trainer.name}"


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="task", name="function_call_schema", node=FunctionCallTaskConfig)
    cs.store(group="task", name="oracle_schema", node=OracleTaskConfig)
    cs.store(group="task", name="tool_json_schema", node=ToolJsonTaskConfig)
    cs.store(group="reward", name="reward_schema", node=RewardConfig)
    cs.store(group="judge", name="judge_schema", node=JudgeConfig)
    cs.store(group="judge", name="litellm_schema", node=LiteLLMJudgeConfig)
    cs.store(group="judge", name="local_schema", node=LocalJudgeConfig)
    cs.store(group="trainer", name="grpo_schema", node=GRPOTrainerConfig)
    cs.store(group="trainer", name="sft_schema", node=SFTTrainerConfig)
    cs.store(group="trainer", name="rloo_schema", node=RLOOTrainerConfig)
    cs.store(group="trainer", name="ppo_schema", node=PPOTrainerConfig)
    cs.store(group="warmup", name="sft_warmup_schema", node=SFTTrainerConfig)
    cs.store(group="logger", name="logger_schema", node=LoggerConfig)
    cs.store(group="paths", name="paths_schema", node=PathsConfig)


register_configs()


def unknown_keys(node, path: str = "") -> list[str]:
    """Keys present in a composed config but absent from its schema.

    Hydra's ``+key=value`` opens the node for writing, which lets a misspelt key into a structured config;
    this walk finds such keys so the run can refuse them.
    """
    import dataclasses

    from omegaconf import DictConfig, ListConfig, OmegaConf

    found: list[str] = []
    if isinstance(node, DictConfig):
        schema = OmegaConf.get_type(node)
        allowed = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
        for key in node.keys():
            full = f"{path}{key}"
            if path == "" and key == "hydra":  # Hydra's own node, present when composed with return_hydra_config
                continue
            if allowed is not None and key not in allowed:
                found.append(full)
                continue
            child = node._get_node(key)
            if isinstance(child, (DictConfig, ListConfig)):
                found += unknown_keys(child, full + ".")
    elif isinstance(node, ListConfig):
        for i in range(len(node)):
            child = node._get_node(i)
            if isinstance(child, (DictConfig, ListConfig)):
                found += unknown_keys(child, f"{path}{i}.")
    return found
