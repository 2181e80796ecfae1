"""What prefilling less of an episode's prompts saves: the common start of a batch's prompts once
(``ao_calib.models.fast_generation.common_prefix``), and then each row's earlier turns kept between turns
(``ao_calib.evaluation.turn_cache``, ``eval.turn_cache_mb``). ``experiment=function_call_smollm2_multiturn``'s
held-out episodes, whose ~1,000-token function docs open every prompt of every turn, played greedily through the
evaluation's generation (``ao_calib.tools.episodes.play``) each way and with every prompt prefilled whole (the
baseline: generation as it was before both), on the same model, rows and batch; alternating rounds in one process
(``bench.report.alternating_rounds``). Reported per episode and as a ratio, with whether each wrote the baseline's
episodes.

    python -m bench.shared_prompt_prefix [--rows 8] [--rounds 2] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import time
from unittest import mock

from omegaconf import OmegaConf

from ao_calib.config.compose import compose_run_config
from ao_calib.evaluation import generation
from ao_calib.evaluation.turn_cache import TurnCache
from ao_calib.models import loading as models
from ao_calib.task_api import build_task
from ao_calib.tools.episodes import play
from bench.report import alternating_rounds, arguments, publish

OVERRIDES = ["experiment=function_call_smollm2_multiturn", "model.source=gguf", "task.data.eval_split=validation"]


def main() -> None:
    args = arguments(__doc__, 2, rows=(8, "held-out episodes per round")).parse_args()
    cfg = compose_run_config(OVERRIDES)
    task = build_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_base_model(cfg.model, source)
    data = task.build_data(tokenizer, model)
    rows = data.test.select(range(min(args.rows, len(data.test)))).to_list()
    kwargs = {"chat_template_kwargs": OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
              "max_new_tokens": cfg.eval.max_new_tokens, "batch_size": cfg.eval.batch_size}
    written: dict[str, list] = {}
    turns: list[float] = []

    def episodes(name: str, shared_from: int, kept_mb: int = 0):
        def run() -> float:
            start = time.perf_counter()
            kept = TurnCache(kept_mb * 2**20) if kept_mb else None
            with mock.patch.object(generation, "MIN_SHARED_PREFIX", shared_from):
                played = play(lambda asked: generation.generate_completions(model, tokenizer, asked, turn_cache=kept,
                                                                            **kwargs),
                              rows, data.row_tools, tokenizer, kwargs["chat_template_kwargs"])
            written[name] = played
            turns.append(sum(sum(m["role"] == "assistant" for m in e) for e in played) / len(played))
            return (time.perf_counter() - start) / len(rows)
        return run

    medians = alternating_rounds({"whole": episodes("whole", 10**9),
                                  "shared": episodes("shared", generation.MIN_SHARED_PREFIX),
                                  "kept": episodes("kept", generation.MIN_SHARED_PREFIX, cfg.eval.turn_cache_mb)},
                                 args.rounds, unit="ms", scale=1000)

    def same(name: str) -> str:
        return "yes" if written[name] == written["whole"] else "no"

    table = [("| prompts prefilled | ms per episode | ratio to whole prompts | model turns per episode | "
              "same episodes |"), "|---|---|---|---|---|",
             f"| whole (baseline) | {1000 * medians['whole']:.0f} | 1.000 | {sum(turns) / len(turns):.2f} | |",
             (f"| common start once | {1000 * medians['shared']:.0f} | {medians['shared'] / medians['whole']:.3f} | "
              f"| {same('shared')} |"),
             (f"| common start once, earlier turns kept | {1000 * medians['kept']:.0f} | "
              f"{medians['kept'] / medians['whole']:.3f} | | {same('kept')} |")]
    publish(table, "shared prompt prefix", f"python -m bench.shared_prompt_prefix --rows {args.rows} --rounds "
            f"{args.rounds}", args.write)


if __name__ == "__main__":
    main()
