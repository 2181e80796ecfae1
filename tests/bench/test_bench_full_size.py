"""bench.full_size on CPU with the tiny shapes (--shrink): the code that a GPU run uses, end to end. Its timings
mean nothing here; the test checks that both benchmarks run and report, and that --write refuses such numbers."""

from __future__ import annotations

import pytest

from bench import full_size


def test_step_benchmark_runs_both_trainers(capsys):
    rows = full_size.main(["step", "--shrink", "--rounds", "1", "--steps", "1", "--rank", "8"])
    out = capsys.readouterr().out
    assert "round 1 oracle" in out and "round 1 trl" in out and "ratio" in out
    assert len(rows) == 1 and "Qwen3-8B shape" in rows[0] and "LoRA rank 8" in rows[0]


def test_memory_benchmark_runs_with_gradient_checkpointing(capsys):
    rows = full_size.main(["memory", "--shrink", "--steps", "1", "--rank", "8", "--generation", "fast_unmerged"])
    assert "gradient checkpointing on" in rows[0] and "Gemma-3-27B shape" in rows[0]
    assert "generation fast_unmerged" in rows[0]
    assert "s/step" in capsys.readouterr().out


def test_write_refuses_cpu_or_shrunk_numbers(tmp_path):
    with pytest.raises(SystemExit):
        full_size.main(["memory", "--shrink", "--write", str(tmp_path / "B.md")])
    assert not (tmp_path / "B.md").exists()
