"""``task=oracle`` settings (``cfg.task``); every default, its help and its allowed values are stated here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ao_calib.calibration import CalibrationConfig
from ao_calib.core.plugins import TaskConfig
from ao_calib.core.settings import Checked, above, at_least, one_of, setting, within


@dataclass
class OracleGeneratedDataConfig(Checked):
    """The offline generator of prompts with known yes/no answers (ao_calib_tasks.oracle.rows.generate)."""

    config_key = "task.data.generate"

    n_train_prompts: int = setting(400, "Generated training prompts.", allowed=at_least(1))
    n_test_prompts: int = setting(100, "Generated held-out prompts.", allowed=at_least(1))
    questions_per_prompt: int = setting(3, "Yes/no questions asked about each prompt.", allowed=at_least(1))
    kinds: list[str] = setting(["topic", "mood", "city"], "Kinds of fact the questions ask about.")
    seed: Optional[int] = setting(None, "The generator's seed; null: trainer.seed, so that trainer.seed=N alone "
                                  "draws other data and splits.")
    n_validation_prompts: int = setting(0, "Prompts of a third disjoint split, for choosing settings "
                                        "(task.data.eval_split=validation scores it).", allowed=at_least(0))
    stated_fraction: float = setting(
        1.0, "The probability that a prompt's topic and mood are written into its text. A question about an unstated "
        "fact keeps its drawn answer, which nothing in the activations holds (a coin flip for any oracle).",
        allowed=within(0, 1, low_open=True))
    phrasings: int = setting(1, "Wordings per question kind (1: one wording; up to 4 for topics), so that the "
                             "question texts are many.", allowed=at_least(1))
    length_matched: bool = setting(
        True, "With stated_fraction < 1: unstated facts leave text of the same length (a request naming no topic, a "
        "neutral sentence for a mood), so that a prompt's length does not tell whether it states a fact. false: the "
        "older, shorter prompts.")


@dataclass
class OracleClassificationDataConfig(Checked):
    """The Activation Oracle paper's yes/no classification files as the run's rows (ao_calib_tasks.oracle.
    classification.source): train/validation/test split by statement per dataset, the Engels probes as
    out-of-distribution test rows."""

    config_key = "task.data.classification"

    enabled: bool = setting(False, "Take the rows from the classification files in place of generated data: "
                            "train/validation/test per in-distribution dataset (split by statement), and the Engels "
                            "probes as out-of-distribution test rows.")
    data_dir: Optional[str] = setting(None, "The folder of classification files (laid out as data/ao_classification)"
                                      "; null: the copy shipped with ao_calib.")
    datasets: list[str] = setting(["geometry_of_truth", "relations", "tense", "singular_plural"],
                                  "The in-distribution datasets: trained on, and scored on their test split.")
    ood: bool = setting(True, "Also score every Engels probe of data_dir, as out-of-distribution test rows.")
    fractions: list[float] = setting([0.8, 0.1, 0.1], "Shares of each dataset's statements in train, validation "
                                     "and test (three numbers summing to 1).")
    all_paraphrases: bool = setting(True, "Ask each question in a paraphrase drawn from every paraphrase of its "
                                    "group; false: always the first one.")
    n_train: int = setting(400, "At most this many training rows per dataset (whole statements, drawn by the "
                           "seed).", allowed=at_least(1))
    n_validation: int = setting(60, "At most this many validation rows per dataset (the Platt fit's rows).",
                                allowed=at_least(1))
    n_test: int = setting(100, "At most this many test rows per in-distribution dataset.", allowed=at_least(1))
    n_ood: int = setting(100, "At most this many test rows per Engels probe.", allowed=at_least(1))
    open_rows: bool = setting(True, "Also ask each validation and test statement its dataset's open question "
                              "(tense: past, present or future?), answered by its class and scored by exact class, "
                              "beside its yes/no row.")
    seed: Optional[int] = setting(None, "Seed of the paraphrases, the split and the caps; null: trainer.seed.")

    def __post_init__(self):
        super().__post_init__()
        values = list(self.fractions)
        if len(values) != 3 or any(v < 0 for v in values) or abs(sum(values) - 1) > 1e-9 or not values[0]:
            raise ValueError(f"fractions={values}: out of range, allowed three non-negative numbers (train, "
                             "validation, test; train > 0) summing to 1")
        if not self.datasets:
            raise ValueError("datasets=[]: out of range, allowed a non-empty list of dataset names")
        engels = [name for name in self.datasets if name.startswith("engels_")]
        if engels:
            raise ValueError(f"datasets={list(self.datasets)}: {engels} are Engels probes, scored out of "
                             "distribution with ood=true; allowed the in-distribution datasets only")


@dataclass
class OracleDataConfig(Checked):
    """Where the oracle's rows come from, and which held-out split every evaluation scores."""

    config_key = "task.data"

    path: Optional[str] = setting(
        None, "WildChat oracle-questions (the hub id ceselder/wildchat-oracle-questions, or a local JSON/JSONL file "
        "of that format): answers are unknown, so an LLM judge (judge=litellm or judge=local) scores them. Takes "
        "precedence over train_path.")
    strict: bool = setting(False, "Stop at the first bad row of `path` instead of reporting and skipping it.")
    test_fraction: float = setting(0.1, "Share of the prompts of `path` held out for evaluation.",
                                   allowed=within(0, 1, low_open=True, high_open=True))
    train_path: Optional[str] = setting(None, "JSONL training rows with prompt, question and answer (\"Yes\"/\"No\"); "
                                        "null: generated data.")
    test_path: Optional[str] = setting(
        None, "JSONL held-out rows, as train_path: every evaluation scores them in place of the held-out split. "
        "Alone, the training rows (and their mean, activations.center) stay the data source's; a row the run's own "
        "splits hold is asked as there. null: the data source's held-out split.")
    generate: OracleGeneratedDataConfig = setting(factory=OracleGeneratedDataConfig, help="The offline generator.")
    classification: OracleClassificationDataConfig = setting(
        factory=OracleClassificationDataConfig, help="The Activation Oracle paper's classification files as the "
        "run's rows, in place of generated data.")
    max_train_samples: Optional[int] = setting(None, "At most this many training rows; null: all.",
                                               allowed=at_least(1))
    eval_split: str = setting(
        "test", "The held-out split every evaluation scores: test for reported numbers, validation (generated data "
        "with generate.n_validation_prompts > 0) while choosing settings, so that the test split is scored once.",
        allowed=one_of("test", "validation"))
    withhold_answers: bool = setting(
        False, "Treat generated or labelled rows as WildChat rows: answers withheld from reward and evaluation, the "
        "judge alone scores (offline, as in oracle_seed_tiny; also a way to compare a judge with known labels).")


@dataclass
class OracleActivationsConfig(Checked):
    """Which activations of the target prompt the oracle reads (see ao_calib.steering.activations.PositionRule)."""

    config_key = "task.activations"

    positions: str = setting("last_k", "Token positions read: last_k (the last k), window (a random window of "
                             "window_min to window_max tokens, the same on every run) or full (every token).",
                             allowed=one_of("last_k", "window", "full"))
    k: int = setting(10, "positions=last_k: how many of the last tokens.", allowed=at_least(1))
    window_min: int = setting(1, "positions=window: the shortest window, in tokens.", allowed=at_least(1))
    window_max: int = setting(10, "positions=window: the longest window, in tokens (at least window_min).",
                              allowed=at_least(1))
    skip_first: int = setting(
        0, "Leading tokens of the templated prompt never read, whatever the rule: the first token of most decoders "
        "is an attention sink whose large norm carries nothing about the prompt (and would dominate the mean with "
        "center=true).",
        allowed=at_least(0))
    batch_size: int = setting(16, "Target prompts per forward pass when the activations are collected.",
                              allowed=at_least(1))
    cache: bool = setting(True, "Cache the activations as safetensors under paths.cache_dir/activations, shared by "
                          "every run and sweep job.")
    center: bool = setting(
        False, "Subtract the training prompts' mean vector (per layer) from every vector before injection, so that "
        "what differs between prompts survives norm-matching where one direction dominates the residual stream. "
        "false: as in the Activation Oracle reference code. See docs/concepts/oracle.md.")


@dataclass
class ClassificationEvalConfig(Checked):
    """The reference's yes/no classification suite (ao_calib_tasks.oracle.classification.datasets), scored for
    accuracy and calibration in every oracle evaluation when enabled."""

    config_key = "task.classification"

    enabled: bool = setting(False, "Score the classification suite in every oracle evaluation.")
    datasets: list[str] = setting(["geometry_of_truth", "relations", "sst2", "md_gender", "snli", "ag_news", "ner",
                                   "tense", "singular_plural"], "The suite's datasets; one whose data is missing "
                                  "is skipped with its reason.")
    data_dir: Optional[str] = setting(None, "The classification suite's data files (gmt/, relations/, tense/, ...), "
                                      "as in the Activation Oracle reference code (adamkarvonen/activation_oracles).")
    n_per_dataset: int = setting(250, "Rows scored per dataset.", allowed=at_least(1))
    seed: int = setting(0, "Seed of the rows drawn from each dataset.")


@dataclass
class OraclePromptConfig(Checked):
    """What is added to every oracle question."""

    config_key = "task.prompt"

    confidence_instruction: bool = setting(
        False, "Append the request for \"[epistemic status: NN]\" to every oracle question. Off by default: the "
        "pretrained oracles never saw such text, so the instruction shifts their input away from what they were "
        "trained on (it may cost accuracy); warmup=format teaches the tag without touching the prompt.")


@dataclass
class StandInOracleConfig(Checked):
    """A tiny stand-in for a pretrained Activation Oracle adapter, for offline runs of the seed's path: the tiny
    model is given a LoRA trained (with injection) to answer yes/no questions about the generated prompts with a
    bare "Yes"/"No" and no tag, and it is saved as the hub checkpoints are (adapter_config.json +
    adapter_model.safetensors, cached under paths.cache_dir/stand_in_oracles). Only for tiny models."""

    config_key = "task.stand_in"

    enabled: bool = setting(False, "Train (or load from the cache) a stand-in oracle adapter for a tiny model and "
                            "start from it. Only for tiny models.")
    steps: int = setting(400, "The stand-in's training steps.", allowed=at_least(1))
    lr: float = setting(3.0e-3, "The stand-in's learning rate.", allowed=above(0))
    batch_size: int = setting(16, "The stand-in's training rows per step.", allowed=at_least(1))
    n_prompts: int = setting(200, "Generated prompts the stand-in is trained on.", allowed=at_least(2))
    seed: int = setting(0, "The stand-in's seed (training and its prompts).")


@dataclass
class OracleWarmupRowsConfig(Checked):
    """Which rows warmup=sft trains on (the training split only; GRPO still sees every row), and the numbers its
    targets state."""

    config_key = "task.warmup_rows"

    confidences: list[int] = setting(
        [50, 60, 70, 80, 90, 100], "SFT targets carry a confidence drawn from these, independent of correctness: the "
        "warm-up teaches the format, and calibration is left to GRPO.")
    readable_only: bool = setting(
        False, "warmup=sft trains only on rows whose answer the prompt's text holds (`readable` in generated rows; "
        "rows without the field count as readable): a coin-flip label would teach guessing. GRPO still sees every "
        "row.")
    open_fraction: float = setting(
        0.0, "warmup=sft asks this share of its generated rows as an open question about the same fact (\"What is "
        "the user's mood?\" -> \"positive\") instead of the yes/no one: the open answer is the fact itself, which "
        "the oracle learns to read sooner. Training rows only.", allowed=within(0, 1))
    open_unstated: bool = setting(
        False, "warmup=sft also trains on the generated rows whose fact the prompt does not state, asked as the open "
        "question with the answer \"not stated\" (kept even with readable_only): the oracle learns to read that "
        "a fact is absent. Training rows only.")
    unstated_tag_only: bool = setting(
        False, "warmup=sft also keeps the yes/no rows about unstated facts (even with readable_only), their "
        "coin-flip answer out of the loss and their tag in it, so the number can learn that the oracle is right "
        "about half the time there. Training rows only; not with open_unstated.")
    none_fraction: float = setting(
        0.0, "The share of warmup=sft's rows copied with random vectors of the same norms in place of the "
        "activations (the `none` condition), their answer out of the loss and their tag in it: the number learns how "
        "often the oracle is right when it reads nothing. Train split only.",
        allowed=within(0, 0.5))

    def __post_init__(self):
        super().__post_init__()
        if self.unstated_tag_only and self.open_unstated:
            raise ValueError("warmup_rows.unstated_tag_only=true: out of range with warmup_rows.open_unstated=true "
                             "(that asks the same rows openly); set one of them to false")


@dataclass
class OracleRLRowsConfig(Checked):
    """Which rows GRPO (the RL stage) trains on: the training split only; the warm-up sees none of these changes."""

    config_key = "task.rl_rows"

    none_fraction: float = setting(
        0.0, "The share of GRPO's training rows that are copies with random vectors of the same norms in place of "
        "the activations (the `none` condition), where no answer beats a coin flip: the calibration reward teaches "
        "stating about chance. Train split only; counted after unreadable_fraction.",
        allowed=within(0, 0.5))
    unreadable_fraction: float = setting(
        0.0, "The share of GRPO's training rows about facts the prompt does not state (generated data): every such "
        "row is kept and readable rows are left out at random until they make this share, so coin-flip rows are not "
        "rare in a batch. 0 keeps every row. Train split only.", allowed=within(0, 1, high_open=True))
    reserved_prompts: float = setting(
        0.0, "The share of training prompts (chosen by the data seed) kept for the RL stage alone: the warm-up never "
        "trains on them and GRPO trains on them only, so the hit rate GRPO sees is not raised by the warm-up's fit. "
        "0: both stages use every prompt. Needs a warm-up; train split only.",
        allowed=within(0, 1, high_open=True))
    expected_over_draw: bool = setting(
        False, "GRPO scores a row the oracle cannot read (an unstated fact, or random vectors; its label a fair "
        "Yes/No draw) by the judge's mean score over the answers the label could have been: the same expected reward "
        "without the coin's noise. Evaluation scores the label. Train split only.")

    def shapes_rows(self) -> bool:
        """Whether any switch changes GRPO's rows from the training rows."""
        return bool(self.none_fraction or self.unreadable_fraction or self.reserved_prompts or self.expected_over_draw)


@dataclass
class OracleTaskConfig(TaskConfig):
    """The Activation Oracle task: yes/no questions about a prompt, answered from its injected activations."""

    config_key = "task"
    # the warm-up's and GRPO's row switches, once top-level keys: refused at start-up naming the new key
    renamed_keys = {"sft_confidences": "warmup_rows.confidences", "sft_readable_only": "warmup_rows.readable_only",
                    "sft_open_fraction": "warmup_rows.open_fraction", "sft_open_unstated": "warmup_rows.open_unstated",
                    "sft_unstated_tag_only": "warmup_rows.unstated_tag_only",
                    "sft_none_fraction": "warmup_rows.none_fraction", "rl_none_fraction": "rl_rows.none_fraction",
                    "rl_unreadable_fraction": "rl_rows.unreadable_fraction",
                    "rl_reserved_prompts": "rl_rows.reserved_prompts",
                    "rl_expected_over_draw": "rl_rows.expected_over_draw"}

    layer_percents: list[int] = setting([25, 50, 75], "Activations are read at these depths (percent of the decoder "
                                        "layers), each in (0, 100); 25/50/75 as in the Activation Oracle reference "
                                        "code.")
    data: OracleDataConfig = setting(factory=OracleDataConfig, help="Where the rows come from.")
    activations: OracleActivationsConfig = setting(factory=OracleActivationsConfig, help="Which activations of the "
                                                   "target prompt the oracle reads.")
    injection_layer: int = setting(1, "Activations are injected at the output of this decoder layer (1 in the "
                                   "Activation Oracle reference code).", allowed=at_least(0))
    steering_coefficient: float = setting(1.0, "The injected vector's norm, as a multiple of the norm of the hidden "
                                          "state at its position (added to it or replacing it: model.steering_mode).")
    calibration: CalibrationConfig = setting(factory=CalibrationConfig, help="The calibration reward's rule.")
    warmup_rows: OracleWarmupRowsConfig = setting(factory=OracleWarmupRowsConfig, help="Which rows warmup=sft "
                                                  "trains on, and the numbers its targets state.")
    rl_rows: OracleRLRowsConfig = setting(factory=OracleRLRowsConfig, help="Which rows GRPO (the RL stage) trains "
                                          "on.")
    eval_control: bool = setting(True, "Also evaluate with activations of other prompts: the control showing the "
                                 "oracle reads its input.")
    eval_none: bool = setting(True, "Also evaluate with random vectors of the same norms in place of the activations "
                              "(the `none` condition): no oracle can beat chance there, so a calibrated one states "
                              "about chance.")
    baselines_logprob_platt: bool = setting(
        True, "At the final evaluation and ao_calib.eval's (with a validation split): the oracle's own answer "
        "probability, Platt-scaled on the validation split, as baselines.logprob_platt in each predictions row and "
        "its AUROC/ECE in eval.json. A run scoring the validation split writes it raw (baselines.logprob).")
    baselines_suite: bool = setting(
        False, "At the final evaluation and ao_calib.eval's, beside logprob(_platt): the bootstrap mode share, the "
        "warm-up's stated number, the text-only rule and a linear probe in each own-condition row (baselines.*), "
        "with their figures per dataset in eval.json. Needs a validation split.")
    baselines_mode_k: int = setting(
        20, "baselines.mode: the exact expected mode share of this many answers sampled at temperature 1, from the "
        "next-token distribution after the oracle's own tag (the answer is its first token).", allowed=at_least(1))
    baselines_probe_c: float = setting(1.0, "baselines.probe: the inverse L2 strength of the linear probe on the "
                                       "activations the oracle reads (scikit-learn's C).", allowed=above(0))
    prompt: OraclePromptConfig = setting(factory=OraclePromptConfig, help="What is added to every oracle question.")
    stand_in: StandInOracleConfig = setting(factory=StandInOracleConfig, help="A tiny stand-in for a pretrained "
                                            "oracle adapter, for offline runs (tiny models only).")
    classification: ClassificationEvalConfig = setting(factory=ClassificationEvalConfig, help="The yes/no "
                                                       "classification suite of the Activation Oracle reference "
                                                       "code, scored in every evaluation when enabled.")

    def __post_init__(self):
        super().__post_init__()  # each field against its allowed values
        # Checks that tie several keys together (validate_plugins builds this schema once at start-up).
        bad = [p for p in self.layer_percents if not 0 < p < 100]
        if not self.layer_percents or bad:
            raise ValueError(f"layer_percents={list(self.layer_percents)}: out of range, allowed a non-empty list "
                             "of percents each in (0, 100)")
        if self.activations.window_max < self.activations.window_min:
            raise ValueError(f"activations.window_max={self.activations.window_max}: out of range, allowed >= "
                             f"{self.activations.window_min}")
        if self.data.classification.enabled and (self.data.path or self.data.train_path):
            raise ValueError("data.classification.enabled=true: out of range with data.path / data.train_path set "
                             "(each names the run's rows); set one of them")
        if self.baselines_suite and not self.baselines_logprob_platt:
            raise ValueError("baselines_suite=true: out of range with baselines_logprob_platt=false (the suite adds "
                             "to that baseline's rows); set it to true")
        if (self.data.eval_split == "validation" and not self.data.generate.n_validation_prompts
                and not self.data.classification.enabled):
            raise ValueError("data.eval_split=validation: set data.generate.n_validation_prompts > 0 (generated "
                             "data holds a validation split only then)")
