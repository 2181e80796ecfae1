"""experiments.tool_json_multiturn: the multi-turn preset's bars against a hand computation on written rows."""

import pytest

from ao_calib.runs.run_dir import RunDir
from experiments.tool_json_multiturn import main, multi_figures, single_figures
from tests.helpers.fake_runs import write_predictions as write


def episode_row(category, right, called, calls=1):
    return {"category": category, "tool_needed": category != "no_tool", "completion": "{}",
            "scores": {"answer_correct": float(right), "called": float(called), "tool_calls": float(calls)}}


@pytest.fixture
def runs(tmp_path):
    multi, single = tmp_path / "multi", tmp_path / "single"
    write(multi, RunDir.FINAL, [episode_row("calculator", 1, 1), episode_row("calculator", 0, 1),
                                episode_row("no_tool", 1, 0, 0), episode_row("no_tool", 0, 1)])
    write(multi, "warmup", [episode_row("calculator", 1, 1), episode_row("calculator", 1, 1),
                            episode_row("no_tool", 1, 0, 0), episode_row("no_tool", 0, 0, 0)])
    write(multi, RunDir.FINAL, [episode_row("calculator", 0, 1), episode_row("calculator", 0, 1),
                                episode_row("no_tool", 1, 0, 0), episode_row("no_tool", 0, 0, 0)], "silent_tools")
    write(single, RunDir.FINAL, [
        {"category": "calculator", "completion": '{"tool": "calculator", "args": {"expression": "2+2"}}',
         "scores": {"args_reward": 1.0}},
        {"category": "calculator", "completion": '{"final": "4"}', "scores": {"args_reward": 1.0}},
        {"category": "calculator", "completion": "not json", "scores": {"args_reward": 0.0}},
        {"category": "no_tool", "completion": '{"final": "Paris"}', "scores": {"args_reward": 1.0}}])
    return multi, single


def test_figures_by_hand(runs):
    multi, single = runs
    m = multi_figures(multi)
    assert m["calculator: final answer right"] == 0.5 and m["calculator: with silent tools"] == 0.0
    assert (m["all rows: after GRPO"], m["all rows: after the warm-up"]) == (0.5, 0.75)
    assert m["no-tool rows: call rate"] == 0.5 and m["calls per episode"] == 0.75
    s = single_figures(single)
    # a right call counts as the single-turn answer; only the '{"final": ...}' message is a right final answer
    assert s["calculator: single-turn answer accuracy (args_reward)"] == pytest.approx(2 / 3)
    assert s["calculator: single-turn final answer right"] == pytest.approx(1 / 3)


def test_the_table_states_both_bars(runs, capsys):
    multi, single = runs
    assert main(["--multi", str(multi), "--single", str(single)]) == 0
    out = capsys.readouterr().out
    assert "| calculator: multi-turn minus single-turn (bar +0.15) | -0.167 |" in out
    assert "| all rows: GRPO minus warm-up (bar >= -0.01) | -0.250 |" in out


def test_a_grpo_run_from_another_runs_warmup_takes_its_rows(runs, tmp_path, capsys):
    multi, _ = runs
    grpo_only = tmp_path / "grpo_only"
    write(grpo_only, RunDir.FINAL, [episode_row("calculator", 1, 1)] * 4)
    write(grpo_only, RunDir.FINAL, [episode_row("calculator", 0, 1)] * 4, "silent_tools")
    assert multi_figures(grpo_only, multi)["all rows: after the warm-up"] == 0.75
    assert main(["--multi", str(grpo_only), "--warmup", str(multi)]) == 0
    assert "| all rows: GRPO minus warm-up (bar >= -0.01) | +0.250 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--multi", str(grpo_only), "--warmup", str(multi), str(multi)])
