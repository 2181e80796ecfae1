"""``python -m ao_calib.eval run_dir=PATH [num_samples=N] [adapter=PATH] [batch_size=B] [max_new_tokens=T]
[temperature=T] [tag=NAME]``

Re-evaluates a saved run on its task's held-out split with the run's own config, and writes ``eval.json``
(or ``eval_<tag>.json`` with ``tag=...``) into the run directory.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ao_calib.errors import AOCalibError
from ao_calib.run_dir import RunDir


@dataclass
class EvalArgs:
    run_dir: str
    num_samples: Optional[int] = None
    adapter: Optional[str] = None  # default: RUN/adapter
    batch_size: Optional[int] = None
    max_new_tokens: Optional[int] = None
    temperature: Optional[float] = None  # default: the run's eval.temperature; 0: greedy
    tag: str = "final"


def parse_args(argv: list[str]) -> EvalArgs:
    try:
        merged = OmegaConf.merge(OmegaConf.structured(EvalArgs), OmegaConf.from_dotlist(argv))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise AOCalibError(f"bad arguments {argv}: {exc}".splitlines()[0] + "\n" + (__doc__ or "")) from None


def run_eval(args: EvalArgs) -> dict:
    from ao_calib import models
    from ao_calib.config import load_run_config
    from ao_calib.evaluation import evaluate
    from ao_calib.task_api import build_task

    run_dir = RunDir(args.run_dir)
    if not run_dir.config.exists():
        raise AOCalibError(f"{run_dir} is not a run directory: {run_dir.config} is missing")
    cfg = load_run_config(run_dir.config)
    adapter = Path(args.adapter) if args.adapter else run_dir.adapter
    if not (adapter / "adapter_config.json").exists():
        raise AOCalibError(f"no saved adapter at {adapter} (did the run finish? pass adapter=RUN/checkpoints/...)")
    task = build_task(cfg)
    models.check_model_available(cfg.model)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source)
    model = models.load_trained_model(cfg.model, source, adapter)
    data = task.build_data(tokenizer, model)
    return evaluate(
        task, model, tokenizer, data.test,
        num_samples=args.num_samples or cfg.eval.num_samples,
        batch_size=args.batch_size or cfg.eval.batch_size,
        max_new_tokens=args.max_new_tokens or cfg.eval.max_new_tokens or cfg.trainer.get("max_completion_length", 128),
        chat_template_kwargs=OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
        run_dir=run_dir, tag=args.tag, mismatches_printed=cfg.eval.mismatches_printed,
        temperature=args.temperature if args.temperature is not None else cfg.eval.get("temperature"),
        seed=cfg.eval.get("seed", 0),
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s: %(message)s")
    try:
        run_eval(parse_args(sys.argv[1:] if argv is None else argv))
    except AOCalibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
