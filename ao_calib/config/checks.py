"""Checks across keys that no single schema can make (a backend with a task, a credit rule with a trainer, ...),
refused at start-up by key before anything heavy loads; and the readings of a config every command shares (its
stages, its evaluation budget)."""

from __future__ import annotations

from omegaconf import DictConfig

from ao_calib.core.errors import AOCalibError
from ao_calib.core.plugins import plugin_class
from ao_calib.core.settings import default_of
from ao_calib.evaluation.config import ConfidenceDecoding
from ao_calib.runs.run_dir import WARMUP
from ao_calib.trainers.config import SFTWarmupConfig

EVAL_MAX_NEW_TOKENS_WITHOUT_ROLLOUTS = 128  # a tool-JSON answer's completion length


def run_stages(cfg) -> list[tuple[str, DictConfig]]:
    """The stages a run trains, in order: the warm-up (unless absent or ``warmup.enabled=false``), then the trainer
    ("train"), on the same adapter. The one place that decides it (the run loop, the task's context)."""
    warmup = cfg.get("warmup")
    return ([(WARMUP, warmup)] if warmup is not None and warmup.get("enabled", True) else []) + [
        ("train", cfg.trainer)]


def eval_token_budget(cfg) -> tuple[str, int]:
    """(the key that sets it, most new tokens of an evaluation's answers): ``eval.max_new_tokens``, else the
    trainer's ``max_completion_length``, else (a trainer that samples nothing: SFT) 128, which
    ``eval.max_new_tokens`` changes."""
    if not cfg.eval.get("max_new_tokens") and cfg.trainer.get("max_completion_length"):
        return "trainer.max_completion_length", cfg.trainer.max_completion_length
    return "eval.max_new_tokens", cfg.eval.get("max_new_tokens") or EVAL_MAX_NEW_TOKENS_WITHOUT_ROLLOUTS


def eval_max_new_tokens(cfg) -> int:
    """Most new tokens of an evaluation's answers (see :func:`eval_token_budget`)."""
    return eval_token_budget(cfg)[1]


def task_injects_activations(cfg) -> bool:
    """Whether the config's task injects activations: a task says so by its class (Task.injects_activations)."""
    task_cls = plugin_class("task", cfg.task.get("_target_")) if cfg.get("task") is not None else None
    return bool(getattr(task_cls, "injects_activations", False))


def check_generation_backend(cfg) -> None:
    """Generation settings that cannot work are refused at start-up, before any model loads (and before the
    initial evaluation): fast generation on a quantized model; ``trainer.use_vllm=true`` for a task that injects
    activations, and when vLLM is not installed."""
    import importlib.util

    if cfg.get("model") is not None and cfg.model.get("quantization"):
        fast = [f"{key}.fast_generation=true" for key in ("warmup", "trainer")
                if cfg.get(key) is not None and cfg[key].get("fast_generation", False)]
        if fast:  # its merged copy would add float LoRA deltas to packed 4-bit weights
            raise AOCalibError(f"{' and '.join(fast)} cannot run with model.quantization={cfg.model.quantization}: "
                               "the fast path's merged copy would add float LoRA deltas to packed quantized "
                               f"weights; set {' and '.join(f.replace('=true', '=false') for f in fast)}, or "
                               "model.quantization=null")
    stage = cfg.get("trainer")
    if stage is None or not stage.get("use_vllm", False):
        return
    if task_injects_activations(cfg):  # vLLM runs no hooks
        raise AOCalibError(f"trainer.use_vllm=true cannot run with task={cfg.task.name}: vLLM cannot run the "
                           "activation-steering hooks; set trainer.use_vllm=false (trainer.fast_generation=true is "
                           "the fast path for steered rollouts)")
    if importlib.util.find_spec("vllm") is None:
        raise AOCalibError("trainer.use_vllm=true: vLLM is not installed; install the extra "
                           "(pip install -e '.[vllm]': vLLM 0.31, the release TRL 1.16 supports with torch 2.13) "
                           "or set trainer.use_vllm=false")


def check_shared_prefix(cfg) -> None:
    """``trainer.shared_prefix=true`` where its prefix pass cannot run is refused at start-up, naming the keys:
    with a task that injects activations (the steering hooks index the rows of a full pass) and with
    ``model.gradient_checkpointing=true`` (the backbone then returns no KV cache in training)."""
    from omegaconf import OmegaConf

    if not OmegaConf.select(cfg, "trainer.shared_prefix", default=False):
        return
    if task_injects_activations(cfg):
        raise AOCalibError(f"trainer.shared_prefix=true cannot run with task={cfg.task.name}: the activations are "
                           "injected into every row of a full forward pass; set trainer.shared_prefix=false")
    if OmegaConf.select(cfg, "model.gradient_checkpointing", default=False):
        raise AOCalibError("trainer.shared_prefix=true cannot run with model.gradient_checkpointing=true: a "
                           "checkpointed model keeps no KV cache in training, and the prompt's cache is what its "
                           "completions share; set one of them to false")


def check_greedy_member(cfg) -> None:
    """``trainer.greedy_member=true`` is refused at start-up where the rollouts do not take the fast path, which
    alone decodes a row of each group greedily: TRL's own generate would sample it and ignore the key."""
    from omegaconf import OmegaConf

    if not OmegaConf.select(cfg, "trainer.greedy_member", default=False):
        return
    off = [key for key, bad in (("trainer.fast_generation=false", not cfg.trainer.fast_generation),
                                ("trainer.use_vllm=true", cfg.trainer.use_vllm)) if bad]
    if off:
        raise AOCalibError(f"trainer.greedy_member=true cannot run with {' and '.join(off)}: only the fast "
                           "generation path decodes one completion of each group greedily; set "
                           "trainer.fast_generation=true and trainer.use_vllm=false, or trainer.greedy_member=false")


# The trainers that apply ``task.calibration.credit`` (ao_calib.trainers.credit, mixed into the GRPO trainer): PPO
# computes its own advantages from a value head and RLOO its own leave-one-out baseline, so a credit rule would be
# silently ignored there.
CONFIDENCE_CREDIT_TRAINERS = ("grpo",)


# Keys a warm-up inherits from the trainer's schema that belong to the whole run: the run reads them off trainer.*
RUN_LEVEL_STAGE_KEYS = ("seed", "resume_from_checkpoint", "init_from")


def check_warmup_run_keys(cfg) -> None:
    """``warmup.seed``, ``warmup.resume_from_checkpoint`` and ``warmup.init_from`` set away from their defaults
    are refused at start-up, by key: the run takes them from ``trainer.*`` (a resume takes up the warm-up too, from
    its own newest checkpoint when the main stage saved none), so a value there would be silently ignored."""
    from omegaconf import OmegaConf

    warmup = OmegaConf.select(cfg, "warmup", default=None)
    if warmup is None:
        return
    for key in RUN_LEVEL_STAGE_KEYS:
        value, default = warmup.get(key), default_of(SFTWarmupConfig, key)
        if value is not None and value != default:
            raise AOCalibError(f"warmup.{key}={value} is not read: the run takes its {key} from trainer.{key}, for "
                               f"the warm-up too; set trainer.{key}={value} instead")


def check_credit_rule(cfg) -> None:
    """``task.calibration.credit`` other than ``sequence`` with a trainer that cannot apply it is refused at
    start-up, naming both keys."""
    from omegaconf import OmegaConf

    credit = OmegaConf.select(cfg, "task.calibration.credit", default=None)  # a task without the rule
    trainer = OmegaConf.select(cfg, "trainer.name", default=None)
    if credit in (None, "sequence") or trainer is None or trainer in CONFIDENCE_CREDIT_TRAINERS or trainer == "sft":
        return
    raise AOCalibError(f"task.calibration.credit={credit} cannot run with trainer={trainer}: only "
                       f"{', '.join(f'trainer={t}' for t in CONFIDENCE_CREDIT_TRAINERS)} applies a credit rule "
                       f"(trainer={trainer} computes its own advantages); set task.calibration.credit=sequence or "
                       f"trainer=grpo")


def check_confidence_loss(cfg) -> None:
    """``warmup.confidence_loss=calibration`` reads each number from its first digit: numbers that share one
    (``task.warmup_rows.confidences``, where the task draws its targets' numbers from it) are refused at start-up,
    by key."""
    from omegaconf import OmegaConf

    from ao_calib.calibration.contract import first_digit_values

    loss = OmegaConf.select(cfg, "warmup.confidence_loss", default=None)
    numbers = OmegaConf.select(cfg, "task.warmup_rows.confidences", default=None)
    if loss != "calibration" or numbers is None:  # a str enum member equals its value
        return
    try:
        first_digit_values(numbers)
    except ValueError as error:
        raise AOCalibError(f"task.warmup_rows.confidences={list(numbers)} cannot run with "
                           f"warmup.confidence_loss=calibration: {error}") from error


def check_confidence_decoding(cfg) -> None:
    """``eval.confidence_decoding=expected`` (or ``mean``) replaces a greedy choice; with a sampled evaluation there
    is none."""
    from omegaconf import OmegaConf

    refuse_expected_number_when_sampled(OmegaConf.select(cfg, "eval.confidence_decoding", default=None),
                                        OmegaConf.select(cfg, "eval.temperature", default=None), "eval.")


def refuse_expected_number_when_sampled(decoding, temperature: float | None, prefix: str = "") -> None:
    """The refusal behind ``check_confidence_decoding``, also for ``ao_calib.eval``'s own options (``prefix``:
    how the keys are spelt there)."""
    if decoding in (ConfidenceDecoding.expected, ConfidenceDecoding.mean) and temperature:
        raise AOCalibError(f"{prefix}confidence_decoding={ConfidenceDecoding(decoding).value} cannot run with "
                           f"{prefix}temperature={temperature}: "
                           "it states the mean of the number's distribution in a greedy evaluation; a sampled one "
                           f"draws the number (set {prefix}temperature=0 or {prefix}confidence_decoding=most_likely)")


def check_combinations(cfg) -> None:
    """The settings refused together at start-up, before any model loads (each check names its keys)."""
    check_generation_backend(cfg)
    check_shared_prefix(cfg)
    check_greedy_member(cfg)
    check_credit_rule(cfg)
    check_warmup_run_keys(cfg)
    check_confidence_loss(cfg)
    check_confidence_decoding(cfg)
    check_checkpoint_selection(cfg)


def check_checkpoint_selection(cfg) -> None:
    """``eval.select_metric`` chooses on the split the evaluations during training score (the task's
    ``task.data.eval_split``): refused unless that is the validation split, and unless there are such evaluations."""
    from omegaconf import OmegaConf

    metric = OmegaConf.select(cfg, "eval.select_metric", default=None)
    if metric is None:
        return
    where = f"eval.select_metric={metric}"
    if not str(metric).strip():
        raise AOCalibError(f"{where}: name a metric the task's evaluation reports, or null (the last step)")
    if not OmegaConf.select(cfg, "eval.enabled", default=True):
        raise AOCalibError(f"{where} needs eval.enabled=true (it chooses by the evaluations during training)")
    if not OmegaConf.select(cfg, "eval.every_steps", default=None):
        raise AOCalibError(f"{where} needs eval.every_steps (the evaluations during training it chooses among); "
                           "null scores the last step only")
    split = OmegaConf.select(cfg, "task.data.eval_split", default=None)
    if split != "validation":
        raise AOCalibError(
            f"{where}: the evaluations during training score task.data.eval_split={split}, so the checkpoint "
            "would be chosen on the split its numbers are reported on. Set task.data.eval_split=validation (the "
            "final evaluation then scores the test split once, on the chosen adapter)")
    held_out_file = OmegaConf.select(cfg, "task.data.test_path", default=None)
    if held_out_file:  # a task may score this file whatever eval_split says
        raise AOCalibError(f"{where}: task.data.test_path={held_out_file} is a held-out file in place of the "
                           "generated validation and test splits; select on generated data (unset it)")
