"""experiments/gpu_choose.py: the step a GPU round scores on the test split is chosen on validation alone."""

from __future__ import annotations

import json
import math

from experiments.gpu_choose import choose, figure


def _evaluation(run, tag: str, accuracy: float, within: float, real: float | None = None, kept: bool = True):
    report = {"metrics": {"accuracy": accuracy, "auroc_within_question": within}}
    if real is not None:
        report["extra_test"] = {"metrics": {"accuracy": real}}
    (run / f"eval_{tag}.json").write_text(json.dumps(report))
    if kept and tag.startswith("step"):
        checkpoint = run / "checkpoints" / f"checkpoint-{tag.removeprefix('step')}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "adapter_model.safetensors").write_bytes(b"")


def test_the_best_kept_step_within_the_guard_and_ties_to_the_later(tmp_path):
    run = tmp_path / "s1"
    run.mkdir()
    _evaluation(run, "warmup", 0.85, 0.50)
    _evaluation(run, "step20", 0.86, 0.70)
    _evaluation(run, "step40", 0.80, 0.90)             # reads worse than the warm-up by more than 0.02: passed over
    _evaluation(run, "step60", 0.84, 0.95, kept=False)  # its checkpoint is gone: cannot be scored
    _evaluation(run, "step80", 0.84, 0.70)             # ties step 20: the later step
    _evaluation(run, "step100", 0.86, math.nan)        # no figure (every answer wrong): passed over
    step, checkpoint, value = choose(run, "metrics.auroc_within_question", "metrics.accuracy", 0.02)
    assert (step, checkpoint.name, value) == (80, "checkpoint-80", 0.70)
    # without the guard the best kept step wins
    assert choose(run, "metrics.auroc_within_question", None, 0.02)[0] == 40
    assert choose(tmp_path / "s1", "metrics.missing", None, 0.02) is None


def test_the_real_cases_can_guard_the_generated_ones(tmp_path):
    run = tmp_path / "s2"
    run.mkdir()
    _evaluation(run, "warmup", 0.75, 0.5, real=0.35)
    _evaluation(run, "step10", 0.80, 0.5, real=0.30)  # generated up, real down 0.05: passed over
    _evaluation(run, "step20", 0.77, 0.5, real=0.34)
    assert choose(run, "metrics.accuracy", "extra_test.metrics.accuracy", 0.02)[0] == 20
    assert figure({"a": {"b": 1}}, "a.b") == 1.0 and figure({"a": {"b": "x"}}, "a.b") is None
