"""How well do SmolLM2's activations of the classification statements hold their labels, by depth? The reading
ceiling of `experiment=oracle_smollm2_classification` before any oracle trains: for each ``--layer-percents``
value, the preset's rows and activations exactly as a run builds them (splits, positions, centring), a linear
probe per question fitted on the training rows (``task.baselines_suite``'s probe) and scored on the validation
rows; accuracy per dataset.

    python -m experiments.oracle_classification_probe_layers --seed 1 --layer-percents 25 50 75 [override ...]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

from experiments.oracle_reading_loop import oracle_and_data
from ao_calib_tasks.oracle.baselines import methods as cb
from ao_calib_tasks.oracle.rows.oracle import activation_id


def probe_accuracy(seed: int, percent: int, overrides: list[str]) -> dict[str, float]:
    _, _, _, task, _ = oracle_and_data([
        "experiment=oracle_smollm2_classification", f"trainer.seed={seed}", f"task.layer_percents=[{percent}]",
        "task.data.eval_split=validation", *overrides])
    built = task.built
    rows = built.test_rows
    _, correct = cb.probe_baseline_rows(built.steering.store, built.train_rows, rows, built.layers, activation_id,
                                        task.config.baselines_probe_c, task.data_seed)
    by_dataset: dict[str, list[float]] = defaultdict(list)
    for row, hit in zip(rows, correct):
        by_dataset[row["dataset"]].append(float(hit))
    return {name: float(np.mean(hits)) for name, hits in sorted(by_dataset.items())} | {
        "rows": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--layer-percents", type=int, nargs="+", default=[25, 50, 75])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    for percent in args.layer_percents:
        print(json.dumps({"layer_percent": percent, "seed": args.seed,
                          **probe_accuracy(args.seed, percent, args.overrides)}), flush=True)


if __name__ == "__main__":
    main()
