"""Two LM heads in ao_calib's own stages, per optimiser step, on the same model, data and settings: TRL's fused head
(``lm_head=fused``, the head TRL's trainers install) against the full-logits head (``lm_head=full``,
ao_calib.trainers.lm_head; ``auto`` picks it off CUDA/XPU). Both sides are ao_calib's trainer; no plain TRL trainer
runs here (bench.grpo_overhead and bench.smollm2_steps time that).

Cases: the quickstart's SFT warm-up and GRPO stage on the tiny Qwen3 (injection in every pass), and the SFT warm-up
and GRPO stage of ``oracle_smollm2`` and ``function_call_smollm2`` on SmolLM2-135M-Instruct. Each case trains both
heads in alternating rounds in one process (bench.report.alternating_medians), each round from a fresh adapter.

    python -m bench.lm_head [--only quickstart_warmup,...] [--rounds 2] [--steps N] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ao_calib.trainers import build_trainer
from bench.grpo_setup import GRPOBench
from bench.report import alternating_medians, device_name, update_benchmarks


@dataclasses.dataclass(frozen=True)
class Case:
    overrides: tuple[str, ...]
    stage: str  # "warmup" or "trainer"
    steps: int


SMALL_ORACLE = ("task.data.generate.n_train_prompts=64", "task.data.generate.n_validation_prompts=8",
                "task.data.generate.n_test_prompts=8")
CASES = {
    "quickstart_warmup": Case(("experiment=quickstart", *SMALL_ORACLE), "warmup", 30),
    "quickstart_grpo": Case(("experiment=quickstart", *SMALL_ORACLE), "trainer", 3),
    "oracle_smollm2_warmup": Case(("experiment=oracle_smollm2", *SMALL_ORACLE), "warmup", 3),
    "oracle_smollm2_grpo": Case(("experiment=oracle_smollm2", *SMALL_ORACLE), "trainer", 1),
    "function_call_smollm2_warmup": Case(("experiment=function_call_smollm2",), "warmup", 4),
    "function_call_smollm2_grpo": Case(("experiment=function_call_smollm2",), "trainer", 1),
}


def sides(case: Case) -> tuple[GRPOBench, dict]:
    """The case's two trainers, each built from a fresh adapter on the same base model and rows."""
    bench = GRPOBench.compose([*case.overrides, f"{case.stage}.max_steps={case.steps}",
                               f"{case.stage}.save_steps=100000", f"{case.stage}.logging_steps=1"])
    stage_name = "warmup" if case.stage == "warmup" else "train"
    warmup_rows = {}

    def build(head: str):
        def trainer(out: Path):
            setup = bench.setup(out)
            stage = bench.cfg[case.stage].copy()
            stage.lm_head = head
            if case.stage == "warmup":
                if "rows" not in warmup_rows:  # the same warm-up rows for every round (built once, not timed)
                    warmup_rows["rows"] = bench.task.warmup_data(stage, setup.model, bench.tokenizer, bench.data,
                                                                 setup.run_dir)
                setup = dataclasses.replace(setup, data=warmup_rows["rows"])
            else:
                setup = dataclasses.replace(setup, data=bench.task.main_stage_data(stage, bench.data))
            return build_trainer(setup, stage, stage_name)
        return trainer

    return bench, {"fused": build("fused"), "full": build("full")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(CASES), help="comma-separated cases: " + ", ".join(CASES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="steps per round for every case (default: each "
                        "case's own)")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args(argv)
    table = ["| case | steps per round | ao_calib, lm_head=fused (TRL's head) | ao_calib, lm_head=full "
             "| ratio full / fused | device |",
             "|---|---|---|---|---|---|"]
    for name in args.only.split(","):
        case = CASES[name]
        if args.steps:
            case = dataclasses.replace(case, steps=args.steps)
        print(f"== {name}", flush=True)
        _, trainers = sides(case)
        medians = alternating_medians(trainers, args.rounds, case.steps)
        fused_ms, full_ms = medians["fused"] * 1000, medians["full"] * 1000
        print(f"median: fused {fused_ms:.0f} ms/step, full {full_ms:.0f} ms/step, ratio {full_ms / fused_ms:.3f}",
              flush=True)
        table.append(f"| {name} | {case.steps} | {fused_ms:.0f} ms | {full_ms:.0f} ms | {full_ms / fused_ms:.3f} | "
                     f"{device_name()} |")
    if args.write:
        steps = f" --steps {args.steps}" if args.steps else ""  # the command written beside the table reruns it
        update_benchmarks(args.write, "lm_head", table, command=f"python -m bench.lm_head --rounds {args.rounds}"
                          f"{steps} --only {args.only} --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
