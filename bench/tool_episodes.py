"""The cost of a multi-turn JSON tool episode against a single-turn completion of the same rows: greedy generation of
``experiment=tool_json_smollm2_multiturn``'s held-out rows as a whole episode (``ao_calib.tools.episodes.play``: the
model's call, the tool run, its answer after reading the result) and as one message (the evaluation's single-turn
path, the episode's first turn alone), on the same model, rows and batch; alternating rounds in one process
(``bench.report.alternating_rounds``). Reported per row and as a ratio; the episodes' mean turns say where the
difference comes from. An untrained model writes few calls: ``--model-run RUN`` loads a trained run's adapter.

    python -m bench.tool_episodes [--rows 16] [--rounds 3] [--model-run RUN] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import OmegaConf

from ao_calib.config.compose import compose_run_config
from ao_calib.evaluation.generation import generate_completions
from ao_calib.models import loading as models
from ao_calib.task_api import build_task
from ao_calib.tools.episodes import play
from bench.report import alternating_rounds, arguments, publish


def main() -> None:
    parser = arguments(__doc__, 3, rows=(16, "held-out rows per round"))
    parser.add_argument("--model-run", default=None, help="a run directory whose adapter the model loads")
    parser.add_argument("--overrides", nargs="*", default=["experiment=tool_json_smollm2_multiturn",
                                                              "model.source=gguf"])
    args = parser.parse_args()
    cfg = compose_run_config(args.overrides)
    task = build_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = (models.load_trained_model(cfg.model, source, str(Path(args.model_run) / "adapter")) if args.model_run
             else models.load_base_model(cfg.model, source))
    data = task.build_data(tokenizer, model)
    rows = data.test.select(range(min(args.rows, len(data.test)))).to_list()
    kwargs = dict(chat_template_kwargs=OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
                  max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size)
    turns: list[float] = []

    def single() -> float:
        start = time.perf_counter()
        generate_completions(model, tokenizer, rows, **kwargs)
        return (time.perf_counter() - start) / len(rows)

    def episode() -> float:
        start = time.perf_counter()
        episodes = play(lambda asked: generate_completions(model, tokenizer, asked, **kwargs), rows, data.tools,
                        tokenizer, kwargs["chat_template_kwargs"])
        elapsed = (time.perf_counter() - start) / len(rows)
        turns.append(sum(sum(m["role"] == "assistant" for m in e) for e in episodes) / len(episodes))
        return elapsed

    medians = alternating_rounds({"single turn": single, "episode": episode}, args.rounds, unit="ms", scale=1000)
    table = ["| rows generated as | ms per row | ratio to one message | model turns per row |", "|---|---|---|---|",
             f"| one message (single turn) | {1000 * medians['single turn']:.0f} | 1.000 | 1.00 |",
             (f"| a whole episode | {1000 * medians['episode']:.0f} | "
              f"{medians['episode'] / medians['single turn']:.3f} | {sum(turns) / len(turns):.2f} |")]
    command = f"python -m bench.tool_episodes --rows {args.rows} --rounds {args.rounds}" + (
        f" --model-run {args.model_run}" if args.model_run else "")
    publish(table, "tool episodes", command, args.write)


if __name__ == "__main__":
    main()
