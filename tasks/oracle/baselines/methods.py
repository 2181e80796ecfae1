"""The field's confidence methods beside the oracle's stated number, on the same own-condition rows
(``task.baselines_suite``), and every method's figures per dataset (``calibration.per_dataset``).

Each method writes ``baselines.<name>`` (a confidence in [0, 1]) into a predictions row; one that gives its own
answer also writes ``baseline_correct.<name>``, against which its confidence is scored:

* ``mode``: the bootstrap mode frequency of ``task.baselines_mode_k`` answers sampled at temperature 1 after the
  oracle's own tag, taken as its exact expectation (``expected_mode_share``) over the next-token distribution of
  the answer's first token (whole "Yes"/"No" tokens on SmolLM2 and Qwen3), not by sampling; its answer the modal
  outcome.
* ``warmup``: the number the warm-up alone stated on the same row (its evaluation ``eval_predictions_warmup``,
  joined by prompt and question), with the warm-up's own correctness.
* ``text_rule``: the hit rate of the other rows asking the same question text in the same dataset
  (``group_rate_rule``): what the wording alone tells.
* ``probe``: a linear probe (``calibration.probe``) on the mean of the very vectors the oracle reads (centred as
  it reads them), one per dataset, question group and asked class, fitted on the training rows; a dataset with no
  training rows (an Engels probe) is cross-fitted on its own rows in ``PROBE_FOLDS`` folds of whole statements;
  where the rows to fit on hold one class, the probe answers it at its smoothed share (``prior_answer``).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable

import numpy as np
import torch

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status, scored_confidence
from ao_calib.calibration.confidence_methods import (OUTCOMES, expected_mode_share, outcome_probabilities,
                                                     outcome_token_ids)
from ao_calib.calibration.metrics import group_rate_rule
from ao_calib.calibration.per_dataset import dataset_figures, figures_table, method_figures, readability_table
from ao_calib.calibration.probe import mean_vectors, probe_baseline, yes_labels
from ao_calib.core.chat import chat_prompt_text
from ao_calib.judges.label import yes_no
from ao_calib.runs.run_dir import WARMUP, RunDir

from ..classification.reading import asked_in, shipped_paraphrases
from ..rows.oracle import activation_id, asks_yes_no

log = logging.getLogger(__name__)
PROBE_FOLDS = 5
JOIN = ("source_id", "question")  # a predictions row's key: the target prompt and the question asked


# ---------------------------------------------------------------------------------------------- mode share

@torch.no_grad()
def outcome_distributions(model, tokenizer, rows: list[dict], completions: list[str], steering, *,
                          chat_template_kwargs: dict, batch_size: int = 16) -> list[np.ndarray]:
    """Per row, [P(yes), P(no), P(other)] of the first answer token at temperature 1, after the prompt (activations
    injected) and the oracle's own tag (confidence 50 when it wrote none), in one right-padded pass per batch."""
    ids = outcome_token_ids(tokenizer)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    prefixes = []
    for row, completion in zip(rows, completions):
        status = parse_epistemic_status(completion)
        prompt = chat_prompt_text(tokenizer, row["prompt"], chat_template_kwargs)
        text = prompt + format_epistemic_status(status.confidence, "").rstrip()
        prefixes.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    out = []
    try:
        for start in range(0, len(rows), batch_size):
            batch = tokenizer.pad({"input_ids": prefixes[start:start + batch_size]}, padding_side="right",
                                  return_tensors="pt").to(device)
            last = batch["attention_mask"].sum(-1) - 1
            injected = steering.batch_for(rows[start:start + batch_size], batch["input_ids"])
            with steering.context(model, injected, "baseline"):
                logits = model(**batch).logits
            at_last = logits[torch.arange(len(last), device=device), last].float().cpu()
            out += [outcome_probabilities(row_logits, ids) for row_logits in at_last]
    finally:
        model.train(was_training)
    return out


def mode_baseline(distributions: list[np.ndarray], labels: list[str], k: int) -> tuple[list, list]:
    """(the expected mode share of k samples, whether the modal outcome is the label) per row; None on a row whose
    label is not yes/no (an open question: its outcomes are not yes, no and other)."""
    yes_no_rows = [yes_no(label) is not None for label in labels]
    shares = [expected_mode_share(p / p.sum(), k) if ok else None for p, ok in zip(distributions, yes_no_rows)]
    correct = [float(OUTCOMES[int(np.argmax(p))] == yes_no(label)) if ok else None
               for p, label, ok in zip(distributions, labels, yes_no_rows)]
    return shares, correct


# --------------------------------------------------------------------------------------------------- probe

def probe_key(row: dict) -> tuple[str, str, str]:
    """The yes/no question a probe answers: the dataset, the question group and the class the question asks about
    (``asked``; on a row without it, read from a tense question's wording by ``asked_in``), so that one probe's
    label means one thing."""
    dataset = row.get("dataset", row.get("kind", ""))
    asked = row.get("asked") or (asked_in(row["question"], shipped_paraphrases()["tense"]) if dataset == "tense"
                                 else "")
    return dataset, str(row.get("question_group", row.get("kind", ""))), asked


def probe_baseline_rows(store: dict, train_rows: list[dict], rows: list[dict], layers: list[int],
                        activation_id: Callable[[str], str], c: float, seed: int) -> tuple[list, list]:
    """(confidence, correct) of the probe on each yes/no row of ``rows`` (oracle rows: ``activation_id``,
    ``source_layer``, ``answer``), read at the row's own layer; ``prior_answer`` where a group's training rows hold
    one class; None on the others."""
    confidence, correct = [None] * len(rows), [None] * len(rows)
    train_by_key: dict[tuple, list[dict]] = {}
    for row in train_rows:
        train_by_key.setdefault(probe_key(row), []).append(row)

    def features(ids: list[str], layer: int) -> torch.Tensor:
        return mean_vectors([store[aid][layer] for aid in ids])

    groups: dict[tuple, list[int]] = {}
    for index, row in enumerate(rows):
        if asks_yes_no(row):  # a probe answers yes/no questions only
            groups.setdefault((probe_key(row), int(row["source_layer"])), []).append(index)
    for (key, layer), indices in groups.items():
        if key in train_by_key:
            train = train_by_key[key]
            folds = [(indices, [activation_id(r["prompt"]) for r in train], [r["answer"] for r in train])]
        else:  # no training rows: cross-fitted on the group's own rows, whole statements per fold
            folds = _cross_folds([rows[i] for i in indices], indices, seed)
        if not folds:  # a single statement: nothing to fit on
            folds = [(indices, [], [])]
        for test_indices, train_ids, train_answers in folds:
            labels = yes_labels(train_answers)
            if not labels.size or labels.min() == labels.max():
                for i in test_indices:
                    confidence[i], correct[i] = prior_answer(labels, rows[i]["answer"])
                continue
            scores = probe_baseline(features(train_ids, layer), labels,
                                    features([rows[i]["activation_id"] for i in test_indices], layer),
                                    yes_labels([rows[i]["answer"] for i in test_indices]), c=c)
            for i, conf, hit in zip(test_indices, scores.confidence.tolist(), scores.correct.tolist()):
                confidence[i], correct[i] = conf, hit
    return confidence, correct


def probe_readability(built, model, tokenizer, c: float, seed: int) -> dict[str, float]:
    """Per dataset, the accuracy on the validation rows of the probe fitted on the training rows
    (``probe_baseline_rows``): how far the vectors the oracle reads hold each dataset's answers, linearly."""
    rows = [r for r in built.validation_rows if asks_yes_no(r)]
    if not rows:
        return {}
    built.steering.store.update(built.extract({r["prompt"] for r in rows}, model, tokenizer))
    rng = random.Random(seed + 1)
    oracle_rows = built.rows_of(rows, [built.draw(rng) for _ in rows])
    _, correct = probe_baseline_rows(built.steering.store, built.train_rows, oracle_rows, built.layers,
                                     activation_id, c, seed)
    hits: dict[str, list[float]] = {}
    for row, hit in zip(oracle_rows, correct):
        hits.setdefault(row.get("dataset", row["kind"]), []).append(hit)
    return {name: sum(h) / len(h) for name, h in hits.items()}


def prior_answer(labels: np.ndarray, answer: str) -> tuple[float, float]:
    """(confidence, correct) where a probe cannot be fitted (its training rows hold one class, or none): the class
    the training rows hold, at its Laplace-smoothed share (n+1)/(n+2); Yes at 0.5 with no training rows."""
    says_yes = bool(labels.size == 0 or labels[0] == 1)
    return (labels.size + 1) / (labels.size + 2), float(says_yes == (yes_no(answer) == "yes"))


def _cross_folds(group: list[dict], indices: list[int], seed: int) -> list[tuple[list[int], list[str], list[str]]]:
    """``PROBE_FOLDS`` folds of whole statements: each fold's rows and the other folds' (ids, answers)."""
    prompts = sorted({r["activation_id"] for r in group})
    random.Random(f"probe_folds:{seed}").shuffle(prompts)
    fold_of = {aid: n % PROBE_FOLDS for n, aid in enumerate(prompts)}
    out = []
    for fold in range(PROBE_FOLDS):
        held = [i for i, r in zip(indices, group) if fold_of[r["activation_id"]] == fold]
        rest = [r for r in group if fold_of[r["activation_id"]] != fold]
        if held and rest:
            out.append((held, [r["activation_id"] for r in rest], [r["answer"] for r in rest]))
    return out


# ------------------------------------------------------------------------------------------------ the suite

def warmup_baseline(run_dir: RunDir, records: list[dict]) -> tuple[list, list]:
    """(the warm-up's stated confidence, its correctness) on each row, joined by ``JOIN``; None where absent."""
    path = run_dir.predictions(WARMUP)
    if not path.is_file():
        log.warning("baselines.warmup: skipped: no warm-up evaluation (%s); set eval.after_warmup=true", path.name)
        return [None] * len(records), [None] * len(records)
    warm = {tuple(r.get(k) for k in JOIN): r for r in map(json.loads, path.read_text().splitlines())}
    joined = [warm.get(tuple(r.get(k) for k in JOIN)) for r in records]
    if any(w is None for w in joined):
        log.warning("baselines.warmup: %d of %d rows were not scored by the warm-up's evaluation (eval.num_samples "
                    "and eval.seed as the final one's join them)", sum(w is None for w in joined), len(joined))
    return ([None if w is None else scored_confidence(w["scores"].get("confidence")) for w in joined],
            [None if w is None else float(w["scores"]["correct"]) for w in joined])


def add_to_records(records: list[dict], name: str, confidence: list, correct: list | None = None) -> None:
    for record, value, hit in zip(records, confidence, correct or [None] * len(records)):
        if value is None:
            continue
        record.setdefault("baselines", {})[name] = float(min(1.0, max(0.0, value)))
        if hit is not None:
            record.setdefault("baseline_correct", {})[name] = float(hit)


def pooled_report(records: list[dict], names: list[str]) -> dict:
    """Each baseline's figures (``method_figures``) over every own-condition row that carries it."""
    rows = [{**r, "dataset": r.get("dataset", r.get("kind"))} for r in records]
    figures = {name: method_figures(rows, name)[0] for name in names}
    return {name: f for name, f in figures.items() if f["n"]}


def text_rule(records: list[dict]) -> list[float]:
    return group_rate_rule([r["scores"]["correct"] for r in records],
                           [f"{r.get('dataset', r.get('kind'))}\x1f{r['question']}" for r in records]).tolist()


def condition_rows(run_dir: RunDir, tag: str, conditions: tuple[str, ...]) -> list[dict]:
    """The rows of the tag's predictions files: its own condition's, then each of ``conditions``' that exists."""
    rows = []
    for variant in (None, *conditions):
        path = run_dir.predictions(tag, variant)
        if path.is_file():
            rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def per_dataset(run_dir: RunDir, tag: str, conditions: tuple[str, ...], probe: dict[str, float] | None = None
                ) -> dict | None:
    """Every method's figures per dataset and pooled (``dataset_figures``) over the tag's predictions files of every
    condition, printed as ``readability_table`` (with the ``probe``'s validation accuracy per dataset, when given)
    and ``figures_table``, with a reliability diagram per pooled group; None when the rows carry no ``dataset``."""
    from ao_calib.reporting.plot import plot_pooled_reliability

    rows = condition_rows(run_dir, tag, conditions)
    if not rows or any("dataset" not in r for r in rows):
        return None
    for row in rows:
        row.setdefault("in_distribution", True)
    figures = dataset_figures(rows)
    print(f"[eval:{tag}] where the oracle reads, and whether its number knows it (per dataset; probe: a linear "
          f"probe's validation accuracy)\n{readability_table(figures, probe)}\n"
          f"[eval:{tag}] every confidence method per dataset (per_dataset in {run_dir.eval_report(tag).name})\n"
          f"{figures_table(figures)}", flush=True)
    plot_pooled_reliability(rows, run_dir.path, tag)
    return figures
