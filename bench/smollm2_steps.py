"""Training steps on SmolLM2-135M-Instruct (CPU): ao_calib against a TRL trainer on the same model, data and batch,
with each pass's share of the machine's own matmul rate.

Four benchmarks, each in alternating rounds in one process (bench.report.alternating_medians):
- oracle GRPO (activations injected in every pass) against TRL's GRPOTrainer on the same prompts, no injection;
- function-call GRPO against TRL's GRPOTrainer;
- tool_json SFT against TRL's SFTTrainer, and tool_json PPO against the nearest TRL trainer (GRPOTrainer, no value
  head, with as many completions and passes per batch: TRL 1.16 has no PPOTrainer), as in bench.tool_json_steps.

A pretrained model stops at its end-of-turn token, so the two sides of a GRPO benchmark do not sample completions
of the same lengths, and a step's time follows its token count (on a CPU a 135 M-parameter pass is compute-bound).
Every forward pass is therefore metered (tokens in, seconds, whether inside ``generate``, with or without grad),
and the ratio is taken per unit of model work: (seconds / model FLOPs) of ao_calib over the same of the TRL trainer.
Model FLOPs: 2 x parameters x tokens for a forward pass, 6 x for a training pass (forward and backward); the
time of a training pass is the step's time less its generation and scoring passes (so it also holds rewards,
the optimiser and the trainer's bookkeeping). The matmul rate is a large float32 matmul timed in the same run.

    python -m bench.smollm2_steps [--rounds 2] [--steps 2] [--only oracle,function_call,sft,ppo] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch

from ao_calib.steering.layout import unwrap
from bench.grpo_setup import GRPOBench
from bench.report import alternating_medians, device_name, update_benchmarks
from bench.tool_json_steps import PPO_BASELINE, ppo_sides, sft_sides

MODEL = "smollm2_135m"


def matmul_gflops(n: int = 2048, repeats: int = 8) -> float:
    """The machine's float32 matmul rate with torch's current threads: the median of ``repeats`` n x n products."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e9


class PassMeter:
    """Tokens and seconds of every forward pass of one model, by pass: ``generation`` (inside ``generate``),
    ``scoring`` (no grad: old-policy, reference and value passes) and ``training`` (with grad)."""

    def __init__(self, model: torch.nn.Module):
        base = unwrap(model)  # not kept: a meter outlives its round, the model must not
        self.parameters = sum(p.numel() for n, p in base.named_parameters() if "lora_" not in n)
        self.tokens: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self._generating = False
        self._started = 0.0
        base.register_forward_pre_hook(self._before, with_kwargs=True)
        base.register_forward_hook(self._after, with_kwargs=True)
        generate = base.generate

        def metered_generate(*args, **kwargs):
            self._generating, start = True, time.perf_counter()
            try:
                return generate(*args, **kwargs)
            finally:
                self._generating = False
                self.seconds["generation"] += time.perf_counter() - start

        base.generate = metered_generate  # PeftModel.generate reaches the base model's through this attribute

    def _kind(self) -> str:
        return "generation" if self._generating else "training" if torch.is_grad_enabled() else "scoring"

    def _before(self, _module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs["inputs_embeds"][..., 0]
        self.tokens[self._kind()] += ids.numel()
        self._started = time.perf_counter()

    def _after(self, _module, _args, _kwargs, _output):
        if self._kind() == "scoring":
            self.seconds["scoring"] += time.perf_counter() - self._started

    def flops(self, kind: str) -> float:
        return (6 if kind == "training" else 2) * self.parameters * self.tokens[kind]


def metered(builders: dict, meters: dict[str, list]) -> dict:
    """The same builders, each trainer's model metered and its ``train`` timed into ``meters[name]``."""

    def wrap(name, build):
        def built(out: Path):
            trainer = build(out)
            meter = PassMeter(trainer.model)
            train = trainer.train

            def timed_train(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return train(*args, **kwargs)
                finally:
                    meter.seconds["step_total"] += time.perf_counter() - start

            trainer.train = timed_train
            meters[name].append(meter)
            return trainer

        return built

    return {name: wrap(name, build) for name, build in builders.items()}


def summarise(meters: list[PassMeter], steps: int, gflops: float) -> dict:
    """Per side, over the counted rounds (round 0 warms up): seconds per step, tokens per second, model FLOPs,
    and each pass's share of the matmul rate."""
    meters = meters[1:]
    total_s = sum(m.seconds["step_total"] for m in meters)
    seconds = {k: sum(m.seconds[k] for m in meters) for k in ("generation", "scoring")}
    seconds["training"] = total_s - seconds["generation"] - seconds["scoring"]
    flops = {k: sum(m.flops(k) for m in meters) for k in ("generation", "scoring", "training")}
    tokens = sum(sum(m.tokens.values()) for m in meters)
    share = {k: (flops[k] / seconds[k] / 1e9 / gflops if seconds[k] > 0 and flops[k] else None) for k in flops}
    return {"ms_per_step": 1000 * total_s / (steps * len(meters)), "tokens_per_s": tokens / total_s,
            "s_per_tflop": total_s / (sum(flops.values()) / 1e12), "share": share,
            "step_share": sum(flops.values()) / total_s / 1e9 / gflops}


GRPO = ["trainer.save_steps=100000", "logger=none", "eval.enabled=false", f"model={MODEL}", "model.source=gguf",
        "trainer.batch_size=2", "trainer.num_generations=4"]


def oracle_grpo(steps: int):
    bench = GRPOBench.compose(["experiment=quickstart", *GRPO, f"trainer.max_steps={steps}",
                               "trainer.max_completion_length=16", "task.data.generate.n_train_prompts=32",
                               "task.data.generate.n_test_prompts=4"])
    return ("oracle GRPO", "2 prompts x 4 completions, 16 new tokens, K=14 vectors injected",
            "TRL GRPOTrainer, same prompts, no injection", {"ao_calib": bench.ao_calib_trainer, "trl": bench.plain_trl_trainer},
            steps)


def function_call_grpo(steps: int):
    bench = GRPOBench.compose(["task=function_call", *GRPO, f"trainer.max_steps={steps}",
                               "trainer.max_completion_length=32", "task.data.generate.n_train=64",
                               "task.data.generate.n_test=4"])
    return ("function-call GRPO", "2 prompts x 4 completions, 32 new tokens", "TRL GRPOTrainer",
            {"ao_calib": bench.ao_calib_trainer, "trl": bench.plain_trl_trainer}, steps)


def tool_json_sft(steps: int):
    return ("tool_json SFT", "batch 8, max length 448", "TRL SFTTrainer, prompt-completion rows",
            sft_sides(MODEL, steps, ["model.source=gguf"])[1], steps)


def tool_json_ppo(steps: int):
    steps = 4 * max(1, steps // 4)  # one batch of rollouts gives ppo_epochs (4) optimiser steps
    return ("tool_json PPO", "8 rollouts x 64 new tokens, 4 PPO epochs per batch",
            PPO_BASELINE, ppo_sides(MODEL, steps, ["model.source=gguf"])[1],
            steps)


# Each builds its sides only when run (--only): composing the oracle's reads activations from the model.
BENCHMARKS = {"oracle": oracle_grpo, "sft": tool_json_sft, "ppo": tool_json_ppo, "function_call": function_call_grpo}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="counted rounds per benchmark (plus one warm-up)")
    parser.add_argument("--steps", type=int, default=2,
                        help="optimiser steps per round (PPO: rounded to a multiple of 4, one batch of rollouts)")
    parser.add_argument("--only", default=None, help="comma-separated benchmark names to run (default: all)")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()

    gflops = matmul_gflops()
    print(f"float32 matmul: {gflops:.1f} GFLOP/s ({device_name()})", flush=True)
    table = ["| benchmark | setting | ao_calib | TRL baseline | ratio per step | ratio per model FLOP | ao_calib tokens/s "
             "| share of matmul rate (generation / scoring / training / whole step) | peak RSS | baseline |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    chosen = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = set(chosen) - set(BENCHMARKS)
    if unknown:
        parser.error(f"--only: unknown {sorted(unknown)}; choose from {', '.join(BENCHMARKS)}")
    for key in chosen:
        name, setting, baseline, builders, steps = BENCHMARKS[key](args.steps)
        meters: dict[str, list] = defaultdict(list)
        medians = alternating_medians(metered(builders, meters), args.rounds, steps)
        ours, trl = (summarise(meters[side], steps, gflops) for side in ("ao_calib", "trl"))
        per_flop = ours["s_per_tflop"] / trl["s_per_tflop"]
        shares = " / ".join("-" if ours["share"][k] is None else f"{ours['share'][k]:.2f}"
                            for k in ("generation", "scoring", "training")) + f" / {ours['step_share']:.2f}"
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"{name}: ao_calib {medians['ao_calib'] * 1000:.0f} ms/step, TRL {medians['trl'] * 1000:.0f} ms/step, "
              f"per step {medians['ao_calib'] / medians['trl']:.3f}, per model FLOP {per_flop:.3f}, "
              f"shares {shares}, trl step share {trl['step_share']:.2f}, peak RSS {peak_gb:.1f} GB", flush=True)
        table.append(f"| {name} | {MODEL}, {setting}; {args.rounds} alternating rounds x {steps} steps "
                     f"| {medians['ao_calib'] * 1000:.0f} ms | {medians['trl'] * 1000:.0f} ms "
                     f"| {medians['ao_calib'] / medians['trl']:.3f} | {per_flop:.3f} | {ours['tokens_per_s']:.0f} "
                     f"| {shares} | {peak_gb:.1f} GB | {baseline} |")
        if args.write:  # after each benchmark: a long run cut short keeps what it measured
            note = (f"Matmul rate: {gflops:.1f} GFLOP/s (float32, 2048 x 2048); device: {device_name()}. Peak RSS is the "
                    "process's peak so far (the benchmarks run in order in one process).")
            update_benchmarks(args.write, "smollm2_steps", [*table, "", note],
                              command=f"python -m bench.smollm2_steps --rounds {args.rounds} --steps {args.steps}"
                              + (f" --only {args.only}" if args.only else "") + " --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
