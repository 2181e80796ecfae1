"""Held-out evaluation: greedy (or seeded, sampled) generation on the test split, every reward component per
sample, and a summary."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ao_calib.io import append_jsonl, write_json
from ao_calib.task_api import Task

log = logging.getLogger(__name__)


@torch.no_grad()
def generate_completions(model, tokenizer, rows: list[dict], *, chat_template_kwargs: dict, max_new_tokens: int,
                         batch_size: int, steering=None, control: bool = False, desc: str = "eval",
                         temperature: float | None = None, seed: int = 0) -> list[str]:
    """Completions for the rows' chat prompts, batched with left padding: greedy (``temperature`` None or 0), or
    sampled at ``temperature``
    from ``seed`` (the caller's random state is left as it was). With ``steering``, each row's activations (or,
    for ``control``, another prompt's) are injected during the prefill."""
    texts = [
        tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True, **chat_template_kwargs)
        for r in rows
    ]
    device = next(model.parameters()).device
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    greedy = not temperature  # None or 0
    sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": temperature, "top_p": 1.0,
                                                    "top_k": 0}
    completions: list[str] = []
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            for start in tqdm(range(0, len(texts), batch_size), desc=desc, leave=False):
                batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True,
                                  add_special_tokens=False).to(device)
                context = contextlib.nullcontext()
                if steering is not None:
                    injected = steering.batch_for(rows[start : start + batch_size], batch["input_ids"],
                                                  control=control)
                    context = steering.context(model, injected, "eval")
                with context:
                    out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                         **sampling)
                completions += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = padding_side
        model.train(was_training)
    return completions


def evaluate(task: Task, model, tokenizer, dataset, *, num_samples: int | None, batch_size: int,
             max_new_tokens: int, chat_template_kwargs: dict, out_dir: Path, tag: str = "final",
             mismatches_printed: int = 3, temperature: float | None = None, seed: int = 0) -> dict:
    """Scores the model on the held-out split; writes ``eval.json`` (``eval_<tag>.json`` for other tags) and
    every prediction to ``eval_predictions[_<tag>].jsonl``. Task variants (a control) are scored beside it.
    Returns the main metrics."""
    def generate(rows: list[dict], control: bool = False, desc: str = tag) -> list[str]:
        return generate_completions(model, tokenizer, rows, chat_template_kwargs=chat_template_kwargs,
                                    max_new_tokens=max_new_tokens, batch_size=batch_size, steering=task.steering(),
                                    control=control, desc=f"eval ({desc})", temperature=temperature, seed=seed)

    rows = dataset.select(range(min(num_samples or len(dataset), len(dataset)))).to_list()
    suffix = "" if tag == "final" else f"_{tag}"
    report = {"tag": tag, "task": task.name, "num_samples": len(rows), "headline_metric": task.headline_metric,
              "decoding": "greedy" if not temperature else f"sampled, temperature {temperature}, seed {seed}"}
    for variant in ["main", *task.eval_variants()]:
        name = tag if variant == "main" else f"{tag}_{variant}"
        completions = generate(rows, control=variant == "control", desc=name)
        records = [{"prompt": row["prompt"][-1]["content"], "completion": completion,
                    "expected": task.reference_output(row), "scores": task.score(completion, row)}
                   for row, completion in zip(rows, completions)]
        metrics = task.aggregate(records, out_dir, name)
        predictions = out_dir / f"eval_predictions{suffix}{'' if variant == 'main' else '_' + variant}.jsonl"
        predictions.unlink(missing_ok=True)
        append_jsonl(predictions, records)
        if variant == "main":
            report["metrics"] = metrics
            _print_summary(task, name, metrics, records, mismatches_printed, predictions.name)
        else:
            report.setdefault("variants", {})[variant] = metrics
            print(f"[eval:{name}] accuracy {metrics['accuracy']:.3f} (main: {report['metrics']['accuracy']:.3f})",
                  flush=True)
    report.update(task.extra_evaluations(model, tokenizer, generate, out_dir, tag))
    write_json(out_dir / f"eval{suffix}.json", report)
    return report["metrics"]


def _print_summary(task: Task, tag: str, metrics: dict, records: list[dict], shown: int, where: str) -> None:
    mismatches = [r for r in records if r["scores"].get(task.headline_metric, 0.0) < 1.0]
    lines = [f"[eval:{tag}] {len(records)} samples, accuracy ({task.headline_metric}) = {metrics['accuracy']:.3f}"]
    lines += [f"  {k:<24} {v:.3f}" for k, v in metrics.items() if k != "accuracy"]
    for r in mismatches[:shown]:
        lines.append(f"  mismatch: expected {r['expected']!r}\n            got      {r['completion'][:200]!r}")
    if len(mismatches) > shown:
        lines.append(f"  ... {len(mismatches) - shown} more mismatches in {where}")
    print("\n".join(lines), flush=True)
