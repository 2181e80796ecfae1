"""Time the oracle's own answer probability (``baselines.logprob_platt``, read at every final evaluation on the
validation rows and the test rows) two ways on the same rows of a finished run, and check they agree:

- one pass: each answer is one token after the same tag, so one pass over the prompt and the tag gives both, rows
  batched (``own_answer_probabilities``, the default);
- two passes: each answer's full text scored in a pass of its own, one row at a time (the way before, kept for
  answers of several tokens).

    python -m bench.oracle_answer_probability RUN [--tag final] [--rows 300] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from experiments.oracle_baselines import _data
from experiments.oracle_reading import rows, scored_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--tag", default="final", help="the evaluation whose own-condition rows are scored")
    parser.add_argument("--split", default=None, help="the split that evaluation drew from (default: the run's)")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from ao_calib.config.compose import load_run_config
    from ao_calib.models import loading as models
    from ao_calib_tasks.oracle.baselines.probabilities import own_answer_probabilities

    cfg = load_run_config(args.run / "config.yaml")
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_trained_model(cfg.model, source, args.run / "adapter")
    data = _data(cfg, args.split or cfg.task.data.eval_split, tokenizer, model)
    records = rows(args.run, args.tag)["own"]
    held_out = scored_rows(data, records, cfg.eval.seed)[: args.rows]
    completions = [r["completion"] for r in records][: args.rows]
    template = dict(cfg.model.chat_template_kwargs)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {len(held_out)} rows of {args.run}")
    timed = {}
    for name, kwargs in (("one pass", {"batch_size": args.batch_size}), ("two passes", {"one_pass": False})):
        start = time.perf_counter()
        timed[name] = (own_answer_probabilities(model, tokenizer, held_out, completions, data.steering,
                                                chat_template_kwargs=template, **kwargs),
                       time.perf_counter() - start)
        print(f"{name}: {timed[name][1]:.1f} s ({timed[name][1] / len(held_out) * 1000:.0f} ms a row)")
    (one, t1), (two, t2) = timed["one pass"], timed["two passes"]
    print(f"ratio one pass / two passes: {t1 / t2:.2f}; largest difference "
          f"{max(abs(a - b) for a, b in zip(one, two)):.2e}")


if __name__ == "__main__":
    main()
