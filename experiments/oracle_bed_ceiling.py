"""What an oracle test bed allows, beside what the oracle and its Platt baseline reached on the same rows.

On a generated bed (``task.data.generate.stated_fraction`` below 1) every predictions row says whether the prompt
states the fact it asks about (``readable``); an unstated fact's label is a coin flip that no reader can foresee.
So, per run, from its ``own`` rows:

- the reader's ceiling on accuracy: every stated row right, the coin's 0.5 on the others;
- the AUROC of readability alone (1 on stated rows, 0.5 on the others), and the AUROC ceiling of any confidence
  that cannot foresee a coin (the stated rows the oracle got right first, the unstated ones tied, the stated rows it
  got wrong last): no stated number can rank the same rows better;
- the oracle's accuracy on stated and unstated rows, its AUROC, and how well its number and the Platt-scaled answer
  probability tell stated rows from unstated ones (AUROC with ``readable`` as the label).

The Platt-scaled answer probability is read from the rows (``baselines.logprob_platt``, written by a run's final
evaluation) or from ``experiments.oracle_baselines``' JSON (``RUN:PREDICTIONS:BASELINES.json``)::

    python -m experiments.oracle_bed_ceiling RUN/eval_predictions.jsonl W_s1/eval_predictions_test.jsonl:W_base_s1.json

``--segments`` also prints, per file, where the number's lead over the answer probability comes from: for each
segment of rows (the question's kind, and whether the prompt states its fact), its rows, accuracy, mean number and
mean answer probability (Platt-scaled where the rows carry it, else raw: ``baselines.logprob``), and the AUROC of
each inside the segment; and two references fitted on the same rows (so not baselines): the AUROC of the segment
rule (every row at its segment's hit rate: a confidence that knows each row's kind and readability and nothing
else), and of that rule with its ties broken by the answer probability (what a number reaches that knows
readability and ranks inside each segment as the answer probability does).

``--draws N --config RUN/config.yaml`` also counts the unstated rows of the held-out split the generator draws for
seeds 0..N-1 with that run's generator settings: how far one seed's split sits from the bed's mean.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ao_calib.calibration.metrics import auroc
from ao_calib.core.io import read_jsonl


@dataclass(frozen=True)
class BedCeiling:
    rows: int
    unstated: int
    accuracy_ceiling: float  # every stated row right, unstated rows at the coin's 0.5
    accuracy: float
    accuracy_stated: float
    accuracy_unstated: float
    auroc_readability: float  # confidence 1 on stated rows, 0.5 on unstated ones
    auroc_ceiling: float  # the most a confidence that cannot foresee a coin reaches on these rows
    auroc_oracle: float
    auroc_platt: float | None
    readable_auroc_oracle: float  # the stated number, stated rows against unstated ones
    readable_auroc_platt: float | None


def _outcomes(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``scores.correct`` and stated number (an untagged row at 0.5, as the calibration metrics score
    it)."""
    correct = np.array([float(r["scores"]["correct"]) for r in rows])
    number = np.array([0.5 if r["scores"].get("confidence") is None else float(r["scores"]["confidence"])
                       for r in rows])
    return correct, number


def bed_ceiling(rows: list[dict], platt: list[float] | None = None) -> BedCeiling:
    """The figures above for one evaluation's ``own`` rows (each with ``readable``, ``scores.correct`` and
    ``scores.confidence``; an untagged row counts at 0.5, as the calibration metrics score it)."""
    if any(r.get("readable") is None for r in rows):
        raise ValueError("every row needs `readable` (a generated bed with task.data.generate.stated_fraction < 1)")
    correct, confidence = _outcomes(rows)
    readable = np.array([bool(r["readable"]) for r in rows])
    right = correct > 0.5
    readability = np.where(readable, 1.0, 0.5)
    best = np.where(readable, np.where(right, 1.0, 0.0), 0.5)
    stated = readable.astype(float)
    return BedCeiling(
        rows=len(rows), unstated=int((~readable).sum()),
        accuracy_ceiling=float(readable.mean() + 0.5 * (~readable).mean()),
        accuracy=float(correct.mean()), accuracy_stated=float(correct[readable].mean()),
        accuracy_unstated=float(correct[~readable].mean()) if (~readable).any() else float("nan"),
        auroc_readability=auroc(readability, correct), auroc_ceiling=auroc(best, correct),
        auroc_oracle=auroc(confidence, correct),
        auroc_platt=None if platt is None else auroc(platt, correct),
        readable_auroc_oracle=auroc(confidence, stated),
        readable_auroc_platt=None if platt is None else auroc(platt, stated))


@dataclass(frozen=True)
class Segment:
    kind: str
    readable: bool
    rows: int
    accuracy: float
    mean_number: float
    mean_answer_probability: float
    auroc_number: float  # inside the segment; NaN when its rows are all right or all wrong
    auroc_answer_probability: float


def segments(rows: list[dict], answer_probability: list[float]) -> tuple[list[Segment], float, float]:
    """Each (kind, readable) segment of ``rows`` (``own`` rows with ``kind``, ``readable`` and the scores), and the
    AUROC over all rows of the segment rule (every row confident at its segment's hit rate), then of that rule
    with its ties broken by the answer probability."""
    correct, number = _outcomes(rows)
    answer = np.asarray(answer_probability, dtype=float)
    keys = [(str(r.get("kind")), bool(r["readable"])) for r in rows]
    out, rule = [], np.zeros(len(rows))
    for key in sorted(set(keys)):
        inside = np.array([k == key for k in keys])
        rule[inside] = correct[inside].mean()
        out.append(Segment(key[0], key[1], int(inside.sum()), float(correct[inside].mean()),
                           float(number[inside].mean()), float(answer[inside].mean()),
                           auroc(number[inside], correct[inside]), auroc(answer[inside], correct[inside])))
    # the rule first, the answer probability inside its ties: each row scored by the rank of its (rule, answer)
    # pair, scaled into [0, 1]
    pairs = list(zip(rule.tolist(), answer.tolist()))
    ordered = sorted(set(pairs))
    rank = {pair: i / max(1, len(ordered) - 1) for i, pair in enumerate(ordered)}
    return out, auroc(rule, correct), auroc([rank[pair] for pair in pairs], correct)


def _answer_probability(rows: list[dict], platt: list[float] | None) -> tuple[list[float] | None, str]:
    """The Platt-scaled answer probability where there is one, else the raw one from the rows; and which."""
    if platt is not None:
        return platt, "Platt-scaled"
    raw = [(r.get("baselines") or {}).get("logprob") for r in rows]
    return (None, "none") if any(v is None for v in raw) else (raw, "raw")


def _platt(rows: list[dict], baselines: Path | None) -> list[float] | None:
    """The Platt-scaled answer probability per row: from experiments.oracle_baselines' JSON (matched by prompt and
    question), else from the rows' own ``baselines.logprob_platt``; None when neither has it."""
    if baselines is not None:
        by_row = {(b["source_id"], b["question"]): b["logprob_platt"] for b in json.loads(baselines.read_text())["rows"]}
        return [by_row[(r["source_id"], r["question"])] for r in rows]
    values = [(r.get("baselines") or {}).get("logprob_platt") for r in rows]
    return None if any(v is None for v in values) else values


def unstated_draws(config: Path, seeds: int) -> list[int]:
    """Unstated rows of the evaluated split the generator draws for seeds 0..seeds-1 with ``config``'s settings."""
    from omegaconf import OmegaConf

    from tasks.oracle.generate import generate_splits_for

    cfg = OmegaConf.load(config)
    split = cfg.task.data.eval_split
    counts = []
    for seed in range(seeds):
        splits = generate_splits_for(cfg.task.data.generate, seed)
        held_out = splits[1] if split == "validation" and len(splits) == 3 else splits[-1]
        counts.append(sum(not r["readable"] for r in held_out))
    return counts


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", nargs="*",
                        help="eval_predictions*.jsonl files, each optionally :BASELINES.json "
                             "(experiments.oracle_baselines)")
    parser.add_argument("--draws", type=int, default=0, help="also count the unstated held-out rows of seeds 0..N-1")
    parser.add_argument("--config", type=Path, help="a run's config.yaml: the generator settings for --draws")
    parser.add_argument("--segments", action="store_true",
                        help="also the number against the answer probability per (kind, readable) segment")
    args = parser.parse_args(argv)
    print("| predictions | rows | unstated | accuracy ceiling | accuracy | stated / unstated | AUROC: readability alone "
          "| AUROC ceiling | oracle AUROC | Platt AUROC | ceiling - Platt | stated vs unstated: number / Platt |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    tables = []
    for spec in args.predictions:
        path, _, baselines = spec.partition(":")
        rows = [r for _, r in read_jsonl(path, "predictions file") if r.get("condition", "own") == "own"]
        platt = _platt(rows, Path(baselines) if baselines else None)
        c = bed_ceiling(rows, platt)
        if args.segments:
            tables.append((path, rows, c.auroc_oracle, *_answer_probability(rows, platt)))
        gap = None if c.auroc_platt is None else c.auroc_ceiling - c.auroc_platt
        print(f"| {path} | {c.rows} | {c.unstated} | {c.accuracy_ceiling:.3f} | {c.accuracy:.3f} | "
              f"{c.accuracy_stated:.3f} / {c.accuracy_unstated:.3f} | {c.auroc_readability:.3f} | "
              f"{c.auroc_ceiling:.3f} | {c.auroc_oracle:.3f} | {_fmt(c.auroc_platt)} | "
              f"{'-' if gap is None else f'{gap:+.3f}'} | {c.readable_auroc_oracle:.3f} / "
              f"{_fmt(c.readable_auroc_platt)} |")
    for path, rows, number_auroc, answer, which in tables:
        if answer is None:
            print(f"\n{path}: no answer probability in the rows (baselines.logprob or logprob_platt); no segments")
            continue
        table, rule, rule_then_answer = segments(rows, answer)
        correct, _ = _outcomes(rows)
        print(f"\n{path}: by segment (answer probability {which}); AUROC over all rows: the number's "
              f"{number_auroc:.3f}, the answer probability's {auroc(answer, correct):.3f}, the segment rule's {rule:.3f}, "
              f"the rule then the answer probability {rule_then_answer:.3f}")
        print("| kind | stated | rows | accuracy | mean number | mean answer probability | AUROC inside: number | "
              "answer probability |")
        print("|---|---|---|---|---|---|---|---|")
        for g in table:
            print(f"| {g.kind} | {'yes' if g.readable else 'no'} | {g.rows} | {g.accuracy:.3f} | {g.mean_number:.3f} | "
                  f"{g.mean_answer_probability:.3f} | {g.auroc_number:.3f} | {g.auroc_answer_probability:.3f} |")
    if args.draws:
        if args.config is None:
            parser.error("--draws needs --config RUN/config.yaml")
        counts = np.array(unstated_draws(args.config, args.draws))
        print(f"\nunstated held-out rows, seeds 0-{args.draws - 1}: mean {counts.mean():.1f}, sd {counts.std():.1f}, "
              f"min {counts.min()}, max {counts.max()}; per seed: {counts.tolist()}")


if __name__ == "__main__":
    main()
