"""Run directories written by hand, for the readers of run directories (report, plot, the commands' options)."""

from __future__ import annotations

import json
from pathlib import Path

from ao_calib.core.io import write_jsonl
from ao_calib.runs.run_dir import RunDir


def make_run(
    run: Path,
    overrides: list[str],
    metrics: list[dict] | None = None,
    summary: dict | None = None,
    eval_metrics: dict | None = None,
    tail: str = "",
) -> Path:
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("trainer:\n  lr: 1.0e-05\n")
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if metrics is not None:
        (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics) + tail)
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    if eval_metrics is not None:
        (run / "eval.json").write_text(json.dumps({"metrics": eval_metrics, "num_samples": 50}))
    return run


def metric_steps(n: int, base: float) -> list[dict]:
    return [
        {"step": s, "loss": 0.1 / s, "reward": base + 0.01 * s, "reward_std": 0.1,
         "rewards/tool_call_exact/mean": base, "rewards/tool_call_exact/std": 0.05,
         "kl": 0.001 * s, "learning_rate": 1e-5}
        for s in range(1, n + 1)
    ]


def write_predictions(run: Path, tag: str, rows: list[dict], variant: str | None = None) -> None:
    """``rows`` as the run's prediction file of evaluation ``tag`` (and ``variant``), where the run writes it."""
    write_jsonl(RunDir(run).predictions(tag, variant), rows)
