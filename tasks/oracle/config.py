"""``task=oracle`` settings (``cfg.task``); every default is stated here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ao_calib.calibration import CalibrationConfig
from ao_calib.config import TaskConfig


@dataclass
class OracleGeneratedDataConfig:
    """The offline generator of prompts with known yes/no answers (ao_calib_tasks.oracle.generate)."""

    n_train_prompts: int = 400
    n_test_prompts: int = 100
    questions_per_prompt: int = 3
    kinds: list[str] = field(default_factory=lambda: ["topic", "mood", "city"])
    seed: Optional[int] = None  # null: trainer.seed, so that trainer.seed=N alone draws other prompts and splits
    # Prompts of a third disjoint split, for choosing settings (task.data.eval_split=validation scores it).
    n_validation_prompts: int = 0
    # Each prompt's topic and mood are written into its text with this probability; a question about an unstated
    # fact keeps its drawn answer, which nothing in the activations holds (a coin flip for any oracle). Below 1,
    # readability varies between rows of one question text, and only the activations tell which row is which.
    stated_fraction: float = 1.0
    # Wordings per question kind (1: one wording; up to 4 for topics), so that the question texts are many.
    phrasings: int = 1


@dataclass
class OracleDataConfig:
    # WildChat oracle-questions (the hub id ceselder/wildchat-oracle-questions, or a local JSON/JSONL file of that
    # format): answers are unknown, so an LLM judge (judge=litellm or judge=local) scores them. Takes precedence
    # over train_path/test_path.
    path: Optional[str] = None
    strict: bool = False  # stop at the first bad row instead of reporting and skipping it
    test_fraction: float = 0.1  # prompts held out from `path` for evaluation
    # JSONL rows with prompt, question and answer ("Yes"/"No"); null -> generated data
    train_path: Optional[str] = None
    test_path: Optional[str] = None
    generate: OracleGeneratedDataConfig = field(default_factory=OracleGeneratedDataConfig)
    max_train_samples: Optional[int] = None
    # The held-out split every evaluation scores: "test" for reported numbers, "validation" (generated data with
    # generate.n_validation_prompts > 0) while choosing settings, so that the test split is scored once.
    eval_split: str = "test"
    # Treat generated or labelled rows as WildChat rows: answers withheld from reward and evaluation, the judge
    # alone scores (the seed's setting, offline; and a way to compare a judge with known labels).
    withhold_answers: bool = False


@dataclass
class OracleActivationsConfig:
    """Which activations of the target prompt the oracle reads (see ao_calib.steering.activations.PositionRule)."""

    positions: str = "last_k"  # last_k | window | full
    k: int = 10
    window_min: int = 1
    window_max: int = 10
    batch_size: int = 16
    cache: bool = True  # safetensors under paths.cache_dir/activations, shared by every run and sweep job
    # Subtract the mean vector of the training prompts (per layer) from every vector before it is injected. A
    # model whose residual stream is dominated by a direction shared by every token (SmolLM2 at layer 15: the mean
    # vector's norm is 130 of a typical 170, two dimensions near 80, the same position of two prompts at cosine
    # 0.98) gives, after norm-matching, nearly the same injected direction for every prompt; centring leaves what
    # differs between prompts. Not in the reference (false: its behaviour).
    center: bool = False


@dataclass
class ClassificationEvalConfig:
    """The reference's yes/no classification suite (ao_calib_tasks.oracle.classification), scored for accuracy and
    calibration in every oracle evaluation when enabled."""

    enabled: bool = False
    datasets: list[str] = field(default_factory=lambda: ["geometry_of_truth", "relations", "sst2", "md_gender", "snli",
                                                         "ag_news", "ner", "tense", "singular_plural"])
    data_dir: Optional[str] = None  # the reference repo's data files (gmt/, relations/, tense/, ...)
    n_per_dataset: int = 250
    seed: int = 0


@dataclass
class OraclePromptConfig:
    # Append the request for "[epistemic status: NN]" to every oracle question. Off by default: the pretrained
    # oracles never saw such text, so the instruction shifts their input away from what they were trained on
    # (it may cost accuracy); warmup=format teaches the tag without touching the prompt.
    confidence_instruction: bool = False


@dataclass
class StandInOracleConfig:
    """A tiny stand-in for a pretrained Activation Oracle adapter, for offline runs of the seed's path: the tiny
    model is given a LoRA trained (with injection) to answer yes/no questions about the generated prompts with a
    bare "Yes"/"No" and no tag, and it is saved as the hub checkpoints are (adapter_config.json +
    adapter_model.safetensors, cached under paths.cache_dir/stand_in_oracles). Only for tiny models."""

    enabled: bool = False
    steps: int = 400
    lr: float = 3.0e-3
    batch_size: int = 16
    n_prompts: int = 200
    seed: int = 0

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1 or self.n_prompts < 2 or self.lr <= 0:
            raise ValueError("stand_in: steps, batch_size >= 1, n_prompts >= 2 and lr > 0 are required")


@dataclass
class OracleTaskConfig(TaskConfig):
    # Activations are read at these depths (percent of the decoder layers); 25/50/75 as in the reference.
    layer_percents: list[int] = field(default_factory=lambda: [25, 50, 75])
    data: OracleDataConfig = field(default_factory=OracleDataConfig)
    activations: OracleActivationsConfig = field(default_factory=OracleActivationsConfig)
    injection_layer: int = 1  # the reference injects at the output of decoder layer 1
    steering_coefficient: float = 1.0
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    # SFT targets carry a confidence drawn from these, independent of correctness: the warm-up teaches the
    # format, and calibration is left to GRPO.
    sft_confidences: list[int] = field(default_factory=lambda: [50, 60, 70, 80, 90, 100])
    # warmup=sft trains only on rows whose answer the prompt's text holds (``readable`` in generated rows; rows
    # without the field count as readable). A row about an unstated fact has a coin-flip label: in the warm-up it
    # teaches the oracle to guess, and it slows the reading it is there to teach. GRPO still sees every row: the
    # stated confidence is learned where reading fails too.
    sft_readable_only: bool = False
    # Also evaluate with activations of other prompts: the control showing the oracle reads its input.
    eval_control: bool = True
    # Also evaluate with random vectors of the same norms in place of the activations (the ``none`` condition): no
    # oracle can beat chance there, so a calibrated one states about chance.
    eval_none: bool = True
    # At the final evaluation (generated data with a validation split, scoring the test split): the oracle's own
    # answer probability, Platt-scaled on the validation split, as baselines.logprob_platt in every predictions row
    # and its AUROC/ECE in eval.json (baselines.logprob_platt): the classical confidence the stated one must beat.
    baselines_logprob_platt: bool = True
    prompt: OraclePromptConfig = field(default_factory=OraclePromptConfig)
    stand_in: StandInOracleConfig = field(default_factory=StandInOracleConfig)
    classification: ClassificationEvalConfig = field(default_factory=ClassificationEvalConfig)

    def __post_init__(self):
        # Ranges checked before any model loads (validate_plugins builds this schema once at start-up).
        bad = [p for p in self.layer_percents if not 0 < p < 100]
        if not self.layer_percents or bad:
            raise ValueError(f"layer_percents={list(self.layer_percents)}: out of range, allowed a non-empty list "
                             "of percents each in (0, 100)")
        checks = (("activations.k", self.activations.k, 1), ("activations.window_min", self.activations.window_min, 1),
                  ("activations.window_max", self.activations.window_max, self.activations.window_min),
                  ("activations.batch_size", self.activations.batch_size, 1),
                  ("injection_layer", self.injection_layer, 0),
                  ("data.generate.n_train_prompts", self.data.generate.n_train_prompts, 1),
                  ("data.generate.n_test_prompts", self.data.generate.n_test_prompts, 1),
                  ("data.generate.questions_per_prompt", self.data.generate.questions_per_prompt, 1),
                  ("data.max_train_samples", self.data.max_train_samples, 1))
        for key, value, low in checks:
            if value is not None and value < low:
                raise ValueError(f"{key}={value}: out of range, allowed >= {low}")
        if self.data.eval_split not in ("test", "validation"):
            raise ValueError(f"data.eval_split={self.data.eval_split!r}: choose test or validation")
        if self.data.eval_split == "validation" and not self.data.generate.n_validation_prompts:
            raise ValueError("data.eval_split=validation: set data.generate.n_validation_prompts > 0 (generated "
                             "data holds a validation split only then)")
        if not 0 < self.data.generate.stated_fraction <= 1:
            raise ValueError(f"data.generate.stated_fraction={self.data.generate.stated_fraction}: out of range, "
                             "allowed (0, 1]")
        if self.data.generate.phrasings < 1 or self.data.generate.n_validation_prompts < 0:
            raise ValueError("data.generate.phrasings must be >= 1 and data.generate.n_validation_prompts >= 0")
        if not 0 < self.data.test_fraction < 1:
            raise ValueError(f"data.test_fraction={self.data.test_fraction}: out of range, allowed (0, 1)")
