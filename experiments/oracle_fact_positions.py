"""Where do the oracle bed's facts lie in the tokens the oracle reads, and what does the first token carry?

For ``--prompts`` generated prompts (the experiment's generator settings), templated as the extraction templates
them: the turn's length in tokens, how many stated topic phrases and mood sentences start inside the last k tokens
(for several k), and, for the experiment's first layer, the norm of each position's residual vector and how much
of the mean over every position (what ``task.activations.center`` takes off with ``positions=full``) is the first
token's.

    python -m experiments.oracle_fact_positions [--experiment oracle_smollm2] [--prompts 600] [--seed 0] [override ...]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from ao_calib_tasks.oracle.rows.generate import MOODS, TOPICS, generate_rows

from ao_calib.config.compose import compose_run_config
from ao_calib.core.settings import plain
from ao_calib.models import loading as models
from ao_calib.steering.activations import (
    PositionRule,
    extract_activations,
    layer_indices,
    target_text,
)

PHRASES = {"topic": [p for ps in TOPICS.values() for p in ps], "mood": [m for ms in MOODS.values() for m in ms]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="oracle_smollm2")
    parser.add_argument("--prompts", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--windows", type=int, nargs="+", default=[16, 20, 24, 28, 32])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg = compose_run_config([f"experiment={args.experiment}", *args.overrides])
    gen, chat_kwargs = cfg.task.data.generate, plain(cfg.model.chat_template_kwargs)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    prompts = [r["prompt"] for r in generate_rows(args.prompts, 1, ("mood",), args.seed,
                                                    stated_fraction=gen.stated_fraction)]
    lengths, stated = [], {kind: 0 for kind in PHRASES}
    inside = {k: {kind: 0 for kind in PHRASES} for k in args.windows}
    for prompt in prompts:
        text = target_text(tokenizer, prompt, chat_kwargs)
        offsets = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
        lengths.append(len(offsets))
        for kind, phrases in PHRASES.items():
            found = [p for p in phrases if p in prompt]
            if not found:
                continue
            stated[kind] += 1
            start = text.index(found[0])
            for k in args.windows:
                inside[k][kind] += start >= offsets[max(0, len(offsets) - k)][0]
    print(f"{len(prompts)} prompts: {min(lengths)}-{max(lengths)} tokens templated "
          f"(mean {statistics.mean(lengths):.1f})")
    for k in args.windows:
        print(f"last {k}: " + ", ".join(f"{kind} {inside[k][kind]} of {stated[kind]}" for kind in PHRASES))

    model = models.load_base_model(cfg.model, source)
    layer = layer_indices(model.config.num_hidden_layers, cfg.task.layer_percents)[0]
    acts = [a[layer].float() for a in extract_activations(model, tokenizer, prompts[:200], [layer],
                                                          PositionRule("full"), chat_template_kwargs=chat_kwargs)]
    first = torch.stack([a[0] for a in acts])
    rest = torch.cat([a[1:] for a in acts]).norm(dim=-1)
    mean = torch.cat(acts).mean(0)
    print(f"layer {layer}, {len(acts)} prompts: first token's norm {first.norm(dim=-1).mean():.0f}; other tokens "
          f"{rest.quantile(0.05):.0f}-{rest.quantile(0.95):.0f} (5th-95th percentile); the mean over every position "
          f"has norm {mean.norm():.0f} and cosine {torch.cosine_similarity(mean, first.mean(0), dim=0):.3f} with the "
          "first token's mean")


if __name__ == "__main__":
    main()
