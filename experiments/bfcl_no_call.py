"""Does a function-calling checkpoint know when it should not call? Its own probability of answering with no call,
against the cases that need a call and those that need none.

For every case of an evaluation the run already scored (its predictions files: the generated held-out cases and
the extra real BFCL set), the script reads off the checkpoint the probability of the empty answer (``[]`` then the
end of the turn, or the end of the turn at once: what BFCL's checker and ``empty_where_call_needed`` count as no
call) at the prompt's end, teacher-forced, with no generation. Where the greedy answer was empty, it also generates
the answer with the empty answer refused (the model's best answer that is not empty). From these it prints:

- how well the no-call probability ranks irrelevance cases above cases that need a call (AUROC), and its values;
- for a rule "answer with no call only if that probability is at least t", what each t would give: accuracy on
  each set, irrelevance accuracy, and empty answers where a call is needed (every answer is the greedy one or,
  where the rule refuses an empty greedy answer, the generated best call).

Nothing is chosen here: the table is for choosing ``t`` on the validation split (the run's ``eval_split``), if at
all, and scoring it once on test::

    python -m experiments.bfcl_no_call RUN --adapter RUN/warmup/checkpoints/checkpoint-120 --tag warmup \
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ao_calib_tasks.function_call.no_call import (
    EmptyAnswerTokens,
    best_call,
    is_empty,
    no_call_probability,
    prompt_ids,
)

from ao_calib.calibration.metrics import auroc

THRESHOLDS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 1.01)


def analyse(task, model, tokenizer, rows: list[dict], records: list[dict], template: dict,
            max_new_tokens: int) -> dict:
    if [r["prompt"][-1]["content"] for r in rows] != [r["prompt"] for r in records]:
        raise SystemExit("the predictions file's prompts are not the rows this config draws: another config or seed?")
    tokens = EmptyAnswerTokens.of(tokenizer)
    cases = []
    for row, record in zip(rows, records):
        ids = prompt_ids(tokenizer, row, template)
        needs_call = bool(json.loads(row["bfcl_ground_truth"]))
        greedy = record["completion"]
        case = {"id": row.get("id"), "kind": row.get("kind"), "needs_call": needs_call,
                "p_no_call": no_call_probability(model, ids, tokens.continuations), "greedy": greedy,
                "greedy_right": float(record["scores"]["bfcl_ast"])}
        if is_empty(greedy):
            case["best_call"] = best_call(model, tokenizer, tokens, ids, max_new_tokens)
            case["best_call_right"] = float(task.score_one(case["best_call"], row)["bfcl_ast"])
        cases.append(case)
    table = []
    for t in THRESHOLDS:
        right, empty_needed = [], 0
        for case in cases:
            replaced = is_empty(case["greedy"]) and case["p_no_call"] < t
            answer_right = case["best_call_right"] if replaced else case["greedy_right"]
            empty = is_empty(case["greedy"]) and not replaced
            right.append((case["needs_call"], answer_right))
            empty_needed += case["needs_call"] and empty
        needed = [r for n, r in right if n]
        irrelevant = [r for n, r in right if not n]
        table.append({"threshold": t, "accuracy": sum(r for _, r in right) / len(right),
                      "needs_call_accuracy": sum(needed) / len(needed) if needed else None,
                      "irrelevance_accuracy": sum(irrelevant) / len(irrelevant) if irrelevant else None,
                      "empty_where_call_needed": empty_needed, "needs_call": len(needed)})
    # irrelevance cases are the positives: NaN where the set holds only one kind
    auc = auroc([c["p_no_call"] for c in cases], [float(not c["needs_call"]) for c in cases])
    return {"cases": cases, "thresholds": table, "auroc_irrelevance_vs_call": None if math.isnan(auc) else auc}


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_analysis(name: str, result: dict) -> None:
    cases = result["cases"]
    empty_needed = [c for c in cases if c["needs_call"] and is_empty(c["greedy"])]
    auc = result["auroc_irrelevance_vs_call"]
    print(f"\n## {name}: {len(cases)} cases; AUROC of p(no call), irrelevance against cases that need a call: "
          + (f"{auc:.3f}" if auc is not None else "n/a (one class)"))
    for label, chosen in (("irrelevance", [c for c in cases if not c["needs_call"]]),
                          ("needs a call, greedy empty", empty_needed),
                          ("needs a call, greedy a call", [c for c in cases if c["needs_call"]
                                                           and not is_empty(c["greedy"])])):
        values = sorted(round(c["p_no_call"], 3) for c in chosen)
        print(f"  p(no call), {label} ({len(values)}): {values if len(values) <= 40 else values[:20] + ['...']}")
    if empty_needed:
        print(f"  best calls where greedy was empty and a call is needed: "
              f"{sum(c['best_call_right'] for c in empty_needed):.0f} of {len(empty_needed)} right")
    print("| no call only if p >= | accuracy | needs a call | irrelevance | empty where a call is needed |")
    print("|---|---|---|---|---|")
    for row in result["thresholds"]:
        print(f"| {row['threshold']:.2f} | {fmt(row['accuracy'])} | {fmt(row['needs_call_accuracy'])} | "
              f"{fmt(row['irrelevance_accuracy'])} | {row['empty_where_call_needed']} of {row['needs_call']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a function_call run directory (its config.yaml, predictions files)")
    parser.add_argument("--adapter", type=Path, required=True, help="the checkpoint the --tag evaluation scored")
    parser.add_argument("--tag", required=True, help="the evaluation's tag (eval_predictions_<tag>[_extra].jsonl)")
    parser.add_argument("--json", type=Path, default=None, help="write every case and table here")
    args = parser.parse_args()

    from ao_calib.config.compose import load_run_config
    from ao_calib.core.io import read_jsonl
    from ao_calib.evaluation.evaluate import held_out_rows
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task

    cfg = load_run_config(args.run / "config.yaml")
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_trained_model(cfg.model, source, args.adapter).merge_and_unload().eval()
    template = dict(cfg.model.chat_template_kwargs)
    task = build_task(cfg)
    results = {}
    sets = {"held-out generated": (lambda: held_out_rows(task.build_data(tokenizer, model).test, cfg.eval.num_samples,
                                                         cfg.eval.seed), f"eval_predictions_{args.tag}.jsonl"),
            "extra (real BFCL)": (task.extra_rows, f"eval_predictions_{args.tag}_extra.jsonl")}
    for name, (rows, predictions) in sets.items():
        path = args.run / predictions
        if not path.is_file():
            print(f"({name}: no {path.name}; skipped)")
            continue
        records = [record for _, record in read_jsonl(path, "predictions file")]
        results[name] = analyse(task, model, tokenizer, rows(), records, template, cfg.eval.max_new_tokens)
        print_analysis(f"{name}, split {cfg.task.data.eval_split}", results[name])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
