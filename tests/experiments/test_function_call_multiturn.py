"""experiments.function_call_multiturn: the BFCL multi-turn preset's bars against a hand computation on written rows."""

import pytest

from ao_calib.runs.run_dir import RunDir
from experiments.function_call_multiturn import main, stage_figures
from tests.helpers.fake_runs import write_predictions as write


def case(turns_passed, errors=0, kind="generated_multi_turn"):
    return {"kind": kind, "scores": {"turns_passed": turns_passed, "bfcl_ast": float(turns_passed == 1.0),
                                     "tool_errors": float(errors)}}


@pytest.fixture
def runs(tmp_path):
    runs = [tmp_path / "s0", tmp_path / "s1"]
    for run, warm in zip(runs, (1.0, 0.5)):
        write(run, "initial", [case(0.0, 2), case(0.5, 1)])
        write(run, "warmup", [case(warm), case(1.0)])
        write(run, RunDir.FINAL, [case(1.0), case(1.0)])
        for tag in ("initial", "warmup", RunDir.FINAL):
            write(run, tag, [case(0.25, kind="multi_turn_base")], "extra")
    return runs


def test_figures_by_hand(runs):
    zero, warm = stage_figures(runs[1], "initial"), stage_figures(runs[1], "warmup")
    assert (zero["generated: per-turn success"], zero["generated: failing calls an episode"]) == (0.25, 1.5)
    assert (warm["generated: per-turn success"], warm["generated: whole episodes"]) == (0.75, 0.5)
    # BFCL's cases are counted apart from the generated ones, and a case passes only when every turn does
    assert (warm["BFCL: cases passed"], warm["BFCL: per-turn success"], warm["BFCL: cases"]) == (0.0, 0.25, 1)


def test_the_table_states_both_bars_over_the_seeds(runs, capsys):
    assert main([str(r) for r in runs]) == 0
    out = capsys.readouterr().out
    # per-turn means over the two runs: zero-shot 0.25, warm-up (1.0 + 0.75) / 2, GRPO 1.0
    assert "| per-turn: warm-up minus zero-shot (bar >= +0.30) | +0.625 |" in out
    assert "| per-turn: GRPO minus warm-up (bar >= -0.01) | +0.125 |" in out
    assert "| BFCL: categories | multi_turn_base | multi_turn_base | multi_turn_base |" in out
