"""``python -m ao_calib.eval run_dir=PATH [option=value ...]``: re-evaluate a saved run.

Evaluates the run's adapter on its task's held-out split with the run's own config and writes the result under a
new tag, beside the run's own files: ``eval_<tag>.json``, ``eval_predictions_<tag>.jsonl`` and the tag's plots.
The run's own result (``eval.json``, written when it finished) is never replaced: without ``tag=`` the tag is
``reeval_<date>-<time>``, and an existing tag is refused unless ``overwrite=true``.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from ao_calib.commands import key_value_command
from ao_calib.config import ConfidenceDecoding
from ao_calib.errors import AOCalibError
from ao_calib.run_dir import RunDir


def _option(help_text: str, default=None):
    return field(default=default, metadata={"help": help_text})


@dataclass
class EvalArgs:
    run_dir: str = field(metadata={"help": "the run directory to re-evaluate (required)"})
    num_samples: Optional[int] = _option("held-out rows to evaluate (default: the run's eval.num_samples; all rows "
                                         "when task.data.test_path= names another held-out set)")
    adapter: Optional[str] = _option("adapter directory to evaluate (default: RUN/adapter; a checkpoint works)")
    batch_size: Optional[int] = _option("generation batch size (default: the run's eval.batch_size)")
    max_new_tokens: Optional[int] = _option("tokens generated per answer (default: the run's setting)")
    temperature: Optional[float] = _option("0: greedy; above 0 samples from a fixed seed (default: the run's)")
    confidence_decoding: Optional[ConfidenceDecoding] = _option(
        "most_likely or expected: the tag's number in a greedy evaluation (default: the run's "
        "eval.confidence_decoding)")
    tag: Optional[str] = _option("name of this evaluation's files, eval_<tag>.json (default: reeval_<date>-<time>)")
    overwrite: bool = _option("replace an evaluation that already has this tag", False)
    task_overrides: list[str] = field(default_factory=list, metadata={
        "help": "task.KEY=VALUE: the run's task settings for this evaluation, e.g. task.data.test_path=DIR "
                "(another held-out set; a BFCL folder in BFCL's layout for task=function_call)"})


def usage() -> str:
    lines = ["usage: python -m ao_calib.eval run_dir=PATH [option=value ...]", "", (__doc__ or "").split("\n\n")[1].strip(),
             "", "options:"]
    for f in dataclasses.fields(EvalArgs):
        name = "task.KEY=VALUE" if f.name == "task_overrides" else f.name
        lines.append(f"  {name:<20} {f.metadata['help']}")
    lines += ["", "example: python -m ao_calib.eval run_dir=outputs/runs/oracle/2026-11-22/10-00-00 num_samples=100",
              "         python -m ao_calib.eval run_dir=RUN task.data.test_path=bench/data/bfcl_v4_real tag=bfcl_real"]
    return "\n".join(lines)


TASK_PREFIX = "task."
TEST_PATH = "task.data.test_path"


def parse_args(argv: list[str]) -> EvalArgs:
    if not argv:
        raise AOCalibError("run_dir= is required\n\n" + usage())
    original, argv = argv, [a for a in argv if not a.startswith(TASK_PREFIX)]  # task.*: task_overrides
    try:
        merged = OmegaConf.merge(OmegaConf.structured(EvalArgs), OmegaConf.from_dotlist(argv))
        parsed = OmegaConf.to_object(merged)
    except (OmegaConfBaseException, ValueError) as exc:
        raise AOCalibError(f"bad arguments {argv}: {exc}".splitlines()[0] + "\n\n" + usage()) from None
    parsed.task_overrides = [a for a in original if a.startswith(TASK_PREFIX)]
    return parsed


def apply_task_overrides(cfg, argv: list[str]) -> list[str]:
    """``task.KEY=VALUE`` arguments set the run's own task settings for this evaluation (another held-out file:
    ``task.data.test_path=DIR``). A key the run's task config does not have is refused by name, and the task's
    schema checks the result, before any model loads. Returns the overrides applied."""
    from ao_calib.config import validate_plugins

    overrides = [a for a in argv if a.startswith(TASK_PREFIX)]
    for override in overrides:
        key, sep, _ = override.partition("=")
        if not sep:
            raise AOCalibError(f"{override}: expected {key}=VALUE")
        if OmegaConf.select(cfg, key, default=_MISSING) is _MISSING:
            raise AOCalibError(f"{key}: the run's task config has no such key (task={cfg.task.get('name')})")
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


def choose_tag(run_dir: RunDir, tag: str | None, overwrite: bool) -> str:
    """The tag this evaluation writes under: never one that already exists, unless ``overwrite``."""
    tag = tag or time.strftime("reeval_%Y%m%d-%H%M%S")
    existing = run_dir.eval_report(tag)
    if existing.exists() and not overwrite:
        raise AOCalibError(f"{existing} already exists: choose another tag=, or pass overwrite=true to replace it")
    return tag


def run_eval(args: EvalArgs) -> tuple[dict, str]:
    """Evaluates and returns ``(metrics, tag)``."""
    from ao_calib import models
    from ao_calib.calibration.decoding import expected_number_plan
    from ao_calib.config import (
        EvalConfig,
        eval_max_new_tokens,
        load_run_config,
        refuse_expected_number_when_sampled,
    )
    from ao_calib.evaluation import evaluate
    from ao_calib.settings import default_of
    from ao_calib.task_api import build_task

    run_dir = RunDir(args.run_dir)
    if not run_dir.config.exists():
        raise AOCalibError(f"{run_dir} is not a run directory: {run_dir.config} is missing")
    tag = choose_tag(run_dir, args.tag, args.overwrite)
    cfg = load_run_config(run_dir.config)
    if apply_task_overrides(cfg, args.task_overrides):
        print(f"evaluating with the run's task settings changed: {' '.join(args.task_overrides)}", flush=True)
    adapter = Path(args.adapter) if args.adapter else run_dir.adapter
    if not (adapter / "adapter_config.json").exists():
        raise AOCalibError(f"no saved adapter at {adapter} (did the run finish? pass adapter=RUN/checkpoints/...)")
    task = build_task(cfg)
    models.check_model_available(cfg.model)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    temperature = args.temperature if args.temperature is not None else cfg.eval.get("temperature")
    decoding = args.confidence_decoding or cfg.eval.get("confidence_decoding",
                                                        default_of(EvalConfig, "confidence_decoding"))
    refuse_expected_number_when_sampled(decoding, temperature)
    expected_number_plan(task, tokenizer, decoding)  # refused before the model loads
    model = models.load_trained_model(cfg.model, source, adapter)
    data = task.build_data(tokenizer, model)
    num_samples = args.num_samples or cfg.eval.num_samples
    if args.num_samples is None and any(o.startswith(TEST_PATH + "=") for o in args.task_overrides):
        # the run's eval.num_samples was sized for its own split, not for this folder: score all of it unless told
        num_samples = None
        print(f"scoring all {len(data.test)} rows of {OmegaConf.select(cfg, TEST_PATH)} (num_samples=N for fewer)",
              flush=True)
    metrics = evaluate(
        task, model, tokenizer, data,
        num_samples=num_samples,
        batch_size=args.batch_size or cfg.eval.batch_size,
        max_new_tokens=args.max_new_tokens or eval_max_new_tokens(cfg),
        chat_template_kwargs=OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
        run_dir=run_dir, tag=tag, mismatches_printed=cfg.eval.mismatches_printed,
        temperature=temperature,
        seed=cfg.eval.get("seed", 0),
        merged_copy=cfg.eval.get("merged_copy", default_of(EvalConfig, "merged_copy")),
        confidence_decoding=decoding,
    )
    print(f"wrote {run_dir.eval_report(tag)} and {run_dir.predictions(tag).name} (tag={tag}); "
          f"the run's own {run_dir.eval_report().name} is unchanged" if tag != RunDir.FINAL else
          f"replaced {run_dir.eval_report(tag)} (tag={tag}, overwrite=true)", flush=True)
    return metrics, tag


def main(argv: list[str] | None = None) -> int:
    return key_value_command(argv, usage, lambda args: run_eval(parse_args(args)))


if __name__ == "__main__":
    sys.exit(main())
