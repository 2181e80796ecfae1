"""``python -m ao_calib.eval run_dir=PATH [option=value ...]``: re-evaluate a saved run.

Evaluates the run's adapter on its task's held-out split with the run's own config and writes the result under a
new tag, beside the run's own files: ``eval_<tag>.json``, ``eval_predictions_<tag>.jsonl`` and the tag's plots.
The run's own result (``eval.json``, written when it finished) is never replaced: without ``tag=`` the tag is
``reeval_<date>-<time>``, and an existing tag is refused unless ``overwrite=true``.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from ao_calib.core.command_options import Command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import ALLOWED, Checked, setting
from ao_calib.evaluation.config import ConfidenceDecoding, EvalConfig
from ao_calib.runs.run_dir import RunDir


def run_setting(name: str, help_text: str):
    """An option that replaces the run's ``eval.<name>`` for this evaluation (null: the run's own), allowing what
    ``eval.<name>`` allows."""
    return setting(None, help_text, allowed=EvalConfig.__dataclass_fields__[name].metadata.get(ALLOWED))


TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass
class EvalArgs(Checked):
    run_dir: str = setting(help="The run directory to re-evaluate.")
    num_samples: Optional[int] = run_setting(
        "num_samples", "Held-out rows to evaluate; null: the run's eval.num_samples (all rows when "
        "task.data.test_path= names another held-out set).")
    adapter: Optional[str] = setting(None, "The adapter directory to evaluate (a checkpoint works); null: "
                                     "RUN/adapter.")
    batch_size: Optional[int] = run_setting("batch_size", "Prompts generated at once; null: the run's "
                                            "eval.batch_size.")
    max_new_tokens: Optional[int] = run_setting("max_new_tokens", "Most new tokens per answer; null: the run's "
                                                "eval.max_new_tokens (or its trainer's max_completion_length).")
    temperature: Optional[float] = run_setting("temperature", "0: greedy; above 0 samples from eval.seed; null: the "
                                               "run's eval.temperature.")
    confidence_decoding: Optional[ConfidenceDecoding] = setting(
        None, "How a greedy evaluation writes the number of a stated confidence (eval.confidence_decoding: "
        "most_likely greedy, expected the scale's number nearest the model's mean, mean that mean rounded); null: "
        "the run's.")
    tag: Optional[str] = setting(None, "Name of this evaluation's files, eval_<tag>.json (letters, digits, _ . -); "
                                 "null: reeval_<date>-<time>.")
    overwrite: bool = setting(False, "Replace an evaluation that already has this tag.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tag is not None and not TAG.fullmatch(self.tag):
            raise AOCalibError(f"tag={self.tag}: use letters, digits, _, . and - only (it names files in the run "
                               "directory), starting with a letter or digit")


TASK_PREFIX = "task."
TEST_PATH = "task.data.test_path"

COMMAND = Command(
    "ao_calib.eval", EvalArgs, "run_dir=PATH [option=value ...] [task.KEY=VALUE ...]",
    (__doc__ or "").split("\n\n")[1].replace("\n", " ").replace("``", "`"),
    examples=("run_dir=outputs/runs/oracle/2026-11-22/10-00-00 num_samples=100",
              "run_dir=RUN task.data.test_path=data/bfcl_v4_real tag=bfcl_real"),
    passes_on=lambda word: word.startswith(TASK_PREFIX),
    passed_help=(("task.KEY=VALUE", "The run's task settings changed for this evaluation, e.g. "
                                    "task.data.test_path=DIR (another held-out set; for task=function_call a folder in "
                                    "BFCL's layout is read as BFCL data). A key the run's task lacks is refused."),))


def parse_args(argv: list[str]) -> tuple[EvalArgs, list[str]]:
    """The options and the ``task.KEY=VALUE`` overrides, every option checked."""
    return COMMAND.parse(argv)


def apply_task_overrides(cfg, argv: list[str]) -> list[str]:
    """``task.KEY=VALUE`` arguments set the run's own task settings for this evaluation (another held-out file:
    ``task.data.test_path=DIR``). A key the run's task config does not have, or a ``*_path`` naming nothing, is
    refused by name, and the task's schema checks the result, before any model loads. Returns the overrides
    applied."""
    from ao_calib.config.compose import moved_key_error, renamed_keys, validate_plugins
    from ao_calib.core.plugins import TaskConfig, plugin_class

    overrides = [a for a in argv if a.startswith(TASK_PREFIX)]
    schema = getattr(plugin_class("task", cfg.task.get("_target_")), "config_class", None) or TaskConfig
    moved = renamed_keys(schema)
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise AOCalibError(f"{override}: expected {key}=VALUE")
        old = key.removeprefix(TASK_PREFIX).split(".")[0]
        if old in moved:
            raise moved_key_error("task", old, moved[old])
        if OmegaConf.select(cfg, key, default=_MISSING) is _MISSING:
            raise AOCalibError(f"{key}: the run's task config has no such key (task={cfg.task.get('name')})"
                               + _closest_task_keys(key, schema))
        if key.endswith("_path") and value not in ("", "null") and not Path(value).exists():
            raise AOCalibError(f"{override}: no such file or folder")  # the data loads after the model
    if overrides:
        dotlist = OmegaConf.from_dotlist(overrides)
        with open_dict(cfg):
            cfg.task = OmegaConf.merge(cfg.task, dotlist.task)
        try:
            validate_plugins(cfg)
        except (OmegaConfBaseException, ValueError) as exc:
            raise AOCalibError(f"{' '.join(overrides)}: {exc}".splitlines()[0]) from None
    return overrides


_MISSING = object()


def _closest_task_keys(key: str, schema: type) -> str:
    """The task's keys spelt closest to ``key``, by the engine ``--help <key>`` uses."""
    from ao_calib.config.help_text import schema_fields
    from ao_calib.core.spelling import closest

    close = closest(key, [row[0] for row in schema_fields(schema, "task")], limit=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def choose_tag(run_dir: RunDir, tag: str | None, overwrite: bool) -> str:
    """The tag this evaluation writes under: never one that already exists, unless ``overwrite``."""
    tag = tag or time.strftime("reeval_%Y%m%d-%H%M%S")
    existing = run_dir.eval_report(tag)
    if existing.exists() and not overwrite:
        raise AOCalibError(f"{existing} already exists: choose another tag=, or pass overwrite=true to replace it")
    return tag


def run_eval_settings(cfg) -> EvalConfig:
    """The run's ``eval.*`` settings, typed: a key its saved config lacks (a run of an older version) takes the
    schema's default, and a key the schema no longer has is left out."""
    from ao_calib.config.compose import typed

    known = [f.name for f in dataclasses.fields(EvalConfig) if f.name in cfg.eval]
    try:
        return typed(OmegaConf.masked_copy(cfg.eval, known), EvalConfig)
    except (OmegaConfBaseException, ValueError) as exc:
        raise AOCalibError(f"the run's eval settings: {str(exc).splitlines()[0]}") from None


def run_eval(args: EvalArgs, task_overrides: list[str] | tuple[str, ...] = ()) -> tuple[dict, str]:
    """Evaluates and returns ``(metrics, tag)``. Everything is checked before the model loads."""
    from ao_calib.calibration.decoding import expected_number_plan
    from ao_calib.config.checks import eval_max_new_tokens, refuse_expected_number_when_sampled
    from ao_calib.config.compose import load_run_config
    from ao_calib.evaluation.evaluate import evaluate
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task, with_run_judge

    run_dir = RunDir(args.run_dir)
    if not run_dir.config.exists():
        raise AOCalibError(f"{run_dir} is not a run directory: {run_dir.config} is missing")
    tag = choose_tag(run_dir, args.tag, args.overwrite)
    cfg = load_run_config(run_dir.config)
    if apply_task_overrides(cfg, list(task_overrides)):
        print(f"evaluating with the run's task settings changed: {' '.join(task_overrides)}", flush=True)
    adapter = Path(args.adapter) if args.adapter else run_dir.adapter
    if not (adapter / "adapter_config.json").exists():
        raise AOCalibError(f"no saved adapter at {adapter} (did the run finish? pass adapter=RUN/checkpoints/...)")
    settings = run_eval_settings(cfg)
    temperature = args.temperature if args.temperature is not None else settings.temperature
    decoding = args.confidence_decoding or settings.confidence_decoding
    refuse_expected_number_when_sampled(decoding, temperature)
    task = build_task(cfg)
    models.check_model_available(cfg.model)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    expected_number_plan(task, tokenizer, decoding)  # refused before the model loads
    model = models.load_trained_model(cfg.model, source, adapter)
    data = with_run_judge(task, task.build_data(tokenizer, model), model, tokenizer)
    num_samples = args.num_samples if args.num_samples is not None else settings.num_samples
    if args.num_samples is None and any(o.startswith(TEST_PATH + "=") for o in task_overrides):
        # the run's eval.num_samples was sized for its own split, not for this folder: score all of it unless told
        num_samples = None
        print(f"scoring all {len(data.test)} rows of {OmegaConf.select(cfg, TEST_PATH)} (num_samples=N for fewer)",
              flush=True)
    metrics = evaluate(
        task, model, tokenizer, data,
        num_samples=num_samples,
        batch_size=args.batch_size if args.batch_size is not None else settings.batch_size,
        max_new_tokens=args.max_new_tokens if args.max_new_tokens is not None else eval_max_new_tokens(cfg),
        chat_template_kwargs=OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
        run_dir=run_dir, tag=tag, mismatches_printed=settings.mismatches_printed,
        temperature=temperature,
        seed=settings.seed,
        merged_copy=settings.merged_copy,
        turn_cache_mb=settings.turn_cache_mb,
        confidence_decoding=decoding,
    )
    print(f"wrote {run_dir.eval_report(tag)} and {run_dir.predictions(tag).name} (tag={tag}); "
          f"the run's own {run_dir.eval_report().name} is unchanged" if tag != RunDir.FINAL else
          f"replaced {run_dir.eval_report(tag)} (tag={tag}, overwrite=true)", flush=True)
    return metrics, tag


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv, run_eval)


if __name__ == "__main__":
    sys.exit(main())
