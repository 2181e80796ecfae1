"""Held-out evaluation: generation on the test split, every reward component per sample, and a summary."""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from ao_calib.calibration.contract import scored_confidence
from ao_calib.calibration.decoding import expected_number_plan
from ao_calib.calibration.metrics import confidence_histogram
from ao_calib.core.io import write_json, write_jsonl
from ao_calib.evaluation.generation import generate_completions
from ao_calib.evaluation.turn_cache import TurnCache
from ao_calib.models.merged_copy import generation_copy_refusal, merged_copy_of
from ao_calib.monitoring.wandb import log_evaluation
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed
from ao_calib.tools.episodes import SILENT_TOOLS, assistant_texts, final_text

if TYPE_CHECKING:  # the task API imports evaluation's config: types only, no import at run time
    from ao_calib.task_api import Task, TaskData

log = logging.getLogger(__name__)

# An evaluation variant and what its rows are answered under: a steered task's injected activations (its
# ``condition``), or a tool task's tools returning nothing; a variant's predictions file carries its name as a suffix
# (``_control``, ``_none``, ``_silent_tools``).
CONDITIONS = {"main": "own", "control": "other", "none": "none", SILENT_TOOLS: SILENT_TOOLS}


def evaluate(task: Task, model, tokenizer, data: TaskData, *, num_samples: int | None, batch_size: int,
             max_new_tokens: int, chat_template_kwargs: dict, run_dir: RunDir, tag: str = "final",
             mismatches_printed: int = 3, temperature: float | None = None, seed: int = 0, merged_copy: bool,
             confidence_decoding: str, turn_cache_mb: int = 0) -> dict:
    """Scores the model on the held-out split (``data.test``, with ``data.steering``); writes the evaluation
    report and every prediction under ``tag`` (``RunDir.eval_report`` / ``RunDir.predictions``). The data's
    conditions (a control) are scored beside it.
    Returns the main metrics, with each variant's accuracy as ``<variant>/accuracy``.

    Every process of a multi-process run calls it: each generates its share of the rows, and the main process
    scores them all (the judge sees each row once), writes and prints; every process returns the same metrics.
    ``merged_copy``: generate from the adapter merged into a copy of its projections (the one the fast rollouts
    use, refreshed now) where the model allows it; the same completions as the unmerged adapter up to rounding.
    ``confidence_decoding``: ``eval.confidence_decoding`` (greedy evaluations; ``ao_calib.calibration.decoding``).
    ``turn_cache_mb``: ``eval.turn_cache_mb``, the keys and values an episode keeps between its turns."""
    generation_model = model
    if merged_copy:
        refusal = generation_copy_refusal(model)
        if refusal is None:
            generation_model = merged_copy_of(model).model
        else:
            log.info("evaluation generates from the unmerged adapter: %s", refusal)

    number_plan = None if temperature else expected_number_plan(task, tokenizer, confidence_decoding)

    def answers(share: list[dict], condition: str, desc: str, turn_cache: TurnCache | None = None) -> list[str]:
        generated = generate_completions(
            generation_model, tokenizer, share, chat_template_kwargs=chat_template_kwargs,
            max_new_tokens=max_new_tokens, batch_size=batch_size, steering=data.steering, condition=condition,
            desc=f"eval ({desc})", temperature=temperature, seed=seed, number_plan=number_plan, turn_cache=turn_cache)
        if temperature:
            return generated
        return task.revise_answers(generation_model, tokenizer, share, generated,
                                   chat_template_kwargs=chat_template_kwargs, max_new_tokens=max_new_tokens)

    def episodes(share: list[dict], condition: str, desc: str) -> list[list[dict]]:
        from ao_calib.tools.episodes import play

        tools = data.tools.silenced() if condition == SILENT_TOOLS else (data.row_tools or data.tools)
        turn_cache = TurnCache(turn_cache_mb * 2**20) if turn_cache_mb else None  # these episodes' turns alone
        return play(lambda asked: answers(asked, "own", desc, turn_cache), share, tools, tokenizer,
                    chat_template_kwargs)

    def generate(rows: list[dict], condition: str = "own", desc: str = tag) -> list:
        """Each row's completion, or with the task's tools its whole episode (``ao_calib.tools.episodes``)."""
        turn = answers if data.tools is None and data.row_tools is None else episodes
        return distributed.map_split(lambda share: turn(share, condition, desc), rows)

    rows = held_out_rows(data.test, num_samples, seed)
    report = {"tag": tag, "task": task.name, "num_samples": len(rows), "headline_metric": task.headline_metric,
              "decoding": ("greedy" if not temperature else f"sampled, temperature {temperature}, seed {seed}")
              + (f"; the tag's number: the mean over its scale ({number_plan.setting})" if number_plan else "")}
    steered = data.steering is not None
    for variant in ["main", *data.conditions]:
        name = tag if variant == "main" else f"{tag}_{variant}"
        completions = generate(rows, condition=CONDITIONS[variant], desc=name)
        metrics, histogram = distributed.on_main(lambda: score_and_record(
            task, data, rows, completions, run_dir, tag, variant, mismatches_printed, steered))
        if variant == "main":
            report["metrics"] = metrics
            if histogram is not None:
                report["confidence_histogram"] = histogram
        else:
            report.setdefault("variants", {})[variant] = metrics
            if distributed.is_main():
                print(f"[eval:{name}] accuracy {metrics['accuracy']:.3f} (main: {report['metrics']['accuracy']:.3f})",
                      flush=True)
    report.update(task.extra_evaluations(model, tokenizer, generate, run_dir, tag, data))
    if distributed.is_main():
        write_json(run_dir.eval_report(tag), report)
        log_evaluation(tag, report["metrics"])
    # Each variant's accuracy rides along (``control/accuracy``, ``none/accuracy``): evaluations during training log
    # them beside the main accuracy (val/...), the reading curve of a steered task.
    return {**report["metrics"], **{f"{variant}/accuracy": metrics["accuracy"]
                                    for variant, metrics in (report.get("variants") or {}).items()}}


def held_out_sample(n_rows: int, num_samples: int | None, seed: int) -> list[int]:
    """The row indices an evaluation of ``num_samples`` rows scores: all rows, or a sample drawn with ``seed``
    (``eval.seed``: the same rows at every evaluation of a run and across runs), in file order. Not the first
    rows: a held-out file is often grouped (a BFCL folder is read one category after another, an oracle test file one
    kind after another), and its first rows would be one group."""
    if not num_samples or num_samples >= n_rows:
        return list(range(n_rows))
    return sorted(random.Random(seed).sample(range(n_rows), num_samples))


def held_out_rows(dataset, num_samples: int | None, seed: int) -> list[dict]:
    """The rows of a held-out ``datasets.Dataset`` that an evaluation of ``num_samples`` rows scores
    (:func:`held_out_sample`), as dicts."""
    return dataset.select(held_out_sample(len(dataset), num_samples, seed)).to_list()


def rows_of_records(rows: list[dict], records: list[dict], seed: int, keys: tuple[str, ...]) -> list[dict] | None:
    """The held-out rows an evaluation that wrote ``records`` (its predictions rows, in order) scored: the sample
    :func:`held_out_sample` draws for that many rows with ``seed`` (``eval.seed``); None when the records' ``keys``
    columns do not match those rows (another split, seed or file), so that nothing is read off the wrong row."""
    drawn = [rows[i] for i in held_out_sample(len(rows), len(records), seed)]
    same = [tuple(r.get(k) for k in keys) for r in drawn] == [tuple(r.get(k) for k in keys) for r in records]
    return drawn if same else None


def score_and_record(task: Task, data: TaskData, rows: list[dict], completions: list, run_dir: RunDir, tag: str,
                     variant: str, mismatches_printed: int, steered: bool = False) -> tuple[dict, dict | None]:
    """One variant's scores (of ``rows`` of ``data``), metrics and predictions file
    (``eval_predictions_<tag>[_<variant>].jsonl``); (metrics, confidence histogram or None); ``steered``: the rows
    carry the activation condition they were answered under.
    A completion that is a multi-turn episode (a list of messages) is recorded whole as ``episode``, and its last
    answer as ``completion``.
    A task's ``extra_evaluations`` scores another held-out set the same way, under a variant name of its own.
    Main process only."""
    name = tag if variant == "main" else f"{tag}_{variant}"
    records = [{"prompt": row["prompt"][-1]["content"], "completion": final_text(completion),
                **({"episode": completion} if isinstance(completion, list) else {}),
                "expected": str(row.get(task.reference_column, "")), "scores": scores,
                **{column: row[column] for column in task.prediction_columns if row.get(column) is not None},
                **({"condition": CONDITIONS.get(variant, variant)} if steered or variant != "main" else {})}
               for row, completion, scores in zip(rows, completions, task.score(completions, rows, data))]
    metrics = task.aggregate(records, run_dir, name)
    predictions = run_dir.predictions(tag, None if variant == "main" else variant)
    write_jsonl(predictions, records)
    histogram = None
    if variant == "main":
        if records and all("confidence" in r["scores"] for r in records):
            histogram = {"bins": "ten equal-width bins over [0, 1], the last closed",
                         "counts": confidence_histogram(
                             [scored_confidence(r["scores"]["confidence"]) for r in records])}
        _print_summary(task, name, metrics, records, mismatches_printed, predictions.name)
    return metrics, histogram


def _print_summary(task: Task, tag: str, metrics: dict, records: list[dict], shown: int, where: str) -> None:
    mismatches = [r for r in records if r["scores"].get(task.headline_metric, 0.0) < 1.0]
    lines = [f"[eval:{tag}] {len(records)} samples, accuracy ({task.headline_metric}) = {metrics['accuracy']:.3f}"]
    lines += [f"  {k:<24} {v:.3f}" for k, v in metrics.items() if k != "accuracy"]
    for r in mismatches[:shown]:
        lines.append(f"  mismatch: expected {r['expected'][:200]!r}\n            got      {_answer_shown(r)[:200]!r}")
    if len(mismatches) > shown:
        lines.append(f"  ... {len(mismatches) - shown} more mismatches in {where}")
    print("\n".join(lines), flush=True)


def _answer_shown(record: dict) -> str:
    """What a wrong row answered: an episode's every assistant message (its calls, then its last answer), so a
    multi-turn row whose last message is a plain "Done." still shows where it went wrong."""
    if "episode" not in record:
        return record["completion"]
    return " | ".join(assistant_texts(record["episode"]))
