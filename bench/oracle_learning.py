"""Does the tiny oracle learn? Runs ``experiment=quickstart`` (SFT warm-up -> GRPO calibration -> eval) for a few
seeds and tabulates held-out accuracy with the right activations and with other prompts' (the control), ECE and
Brier after SFT and after GRPO.

    python -m bench.oracle_learning [--seeds 0 1 2] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import device_name, update_benchmarks

ROOT = Path(__file__).resolve().parent.parent
STAGES = (("SFT", "eval_warmup.json"), ("SFT+GRPO", "eval.json"))


def run(seed: int, out: Path) -> tuple[dict, float]:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ao_calib.run", "experiment=quickstart", f"warmup.seed={seed}",
                    f"trainer.seed={seed}", f"hydra.run.dir={out}"], cwd=ROOT, check=True, capture_output=True)
    results = {}
    for stage, name in STAGES:
        report = json.loads((out / name).read_text())
        results[stage] = {**report["metrics"], "control_accuracy": report["variants"]["control"]["accuracy"],
                          "n": report["num_samples"]}
    return results, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    rows, walls = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            results, wall = run(seed, Path(tmp) / f"seed{seed}")
            walls.append(wall)
            for stage, _ in STAGES:
                m = results[stage]
                rows.append(f"| {seed} | {stage} | {m['accuracy']:.3f} | {m['control_accuracy']:.3f} | "
                            f"{m['ece']:.3f} | {m['brier']:.3f} | {m['mean_confidence']:.3f} | {m['n']} |")
                print(rows[-1], flush=True)
    print(f"wall time per run: {statistics.fmean(walls):.0f} s")
    if args.write:
        update_benchmarks(args.write, "oracle_learning", [
            "| seed | checkpoint | accuracy (own activations) | accuracy (other prompts' activations) | ECE | Brier "
            "| mean confidence | held-out questions |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Wall time per `experiment=quickstart` run (SFT, GRPO, four evaluations): "
            f"{statistics.fmean(walls):.0f} s on {device_name()}.",
        ], command="python -m bench.oracle_learning --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
