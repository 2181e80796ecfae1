"""Reward components from the user's own code (``reward.components.<name>._target_``), from a package outside the
repository: loaded with their kwargs and weight, added to the training reward, and reported by name and sample
when they raise."""

from __future__ import annotations

import json
import textwrap

import pytest
from omegaconf import OmegaConf

from ao_calib.core.errors import AOCalibError
from ao_calib.rewards import RewardFunctionError, build_reward_schedule
from tests.helpers.commands import run_cli

MODULE = '''
    from ao_calib.rewards import completion_text


    def constant(completions, value, **columns):
        """Scores every completion ``value``: its effect on the trained reward is exactly weight * value."""
        return [value for _ in completions]


    def shortness(completions, max_chars=40, **columns):
        return [max(0.0, 1.0 - len(completion_text(c)) / max_chars) for c in completions]


    def picky(completions, answer, **columns):
        """Fails on one particular row, as user code does."""
        return [1.0 / (0 if "boom" in a else 1) for a in answer]
'''


@pytest.fixture()
def user_package(tmp_path, monkeypatch):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "my_rewards.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _mix(**components):
    return OmegaConf.create({"name": "custom", "weights": {"tool_call_exact": 1.0}, "phases": [],
                             "components": components})


def test_components_join_the_mix_with_their_weight_and_kwargs(user_package):
    available = {"tool_call_exact": lambda completions, **_: [0.0] * len(completions)}
    schedule = build_reward_schedule(_mix(short={"_target_": "my_rewards.shortness", "weight": 0.5,
                                                 "kwargs": {"max_chars": 10}}), available)
    assert schedule.names == ("tool_call_exact", "short") and schedule.weights_at(0) == (1.0, 0.5)
    assert available["short"](completions=["abcde", "x" * 20], prompts=None) == [0.5, 0.0]
    assert available["short"].__name__ == "short"  # the name TRL logs it under


def test_a_raising_reward_names_itself_and_the_row(user_package):
    available = {"tool_call_exact": lambda completions, **_: [0.0] * len(completions)}
    build_reward_schedule(_mix(picky={"_target_": "my_rewards.picky"}), available)
    with pytest.raises(RewardFunctionError) as err:
        available["picky"](completions=["a", "b", "c"], answer=["fine", "boom here", "fine"])
    message = str(err.value)
    assert "reward 'picky' raised ZeroDivisionError" in message and "sample 1" in message and "boom here" in message


@pytest.mark.parametrize("component,needle", [
    ({"_target_": "my_rewards.nowhere"}, "reward.components.bad._target_=my_rewards.nowhere: cannot import"),
    ({"_target_": "no_such_pkg.fn"}, "Is its package installed"),
])
def test_bad_target_is_a_clear_error(user_package, component, needle):
    with pytest.raises(AOCalibError, match="cannot import") as err:
        build_reward_schedule(_mix(bad=component), {})
    assert needle in str(err.value)


@pytest.mark.slow
def test_training_rewards_change_by_weight_times_value(tmp_path):
    """A real run (tiny GRPO, 2 steps) with the package only on PYTHONPATH: the trained reward is the built-in
    mix plus 0.5 * 0.3 at every step, and the component is logged under its name."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "my_rewards.py").write_text(textwrap.dedent(MODULE))
    out = tmp_path / "run"
    result = run_cli("ao_calib.run", "experiment=function_call_tiny", "trainer.max_steps=2", "eval.enabled=false",
                     "trainer.num_generations=2", "trainer.max_completion_length=8", "reward=function_call_strict",
                     "+reward.components.bonus={_target_:my_rewards.constant,weight:0.5,kwargs:{value:0.3}}",
                     f"hydra.run.dir={out}", env={"PYTHONPATH": str(folder)})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward" in r]
    assert len(steps) == 2
    for r in steps:
        assert r["rewards/bonus/mean"] == pytest.approx(0.3)
        assert r["reward"] == pytest.approx(r["rewards/tool_call_exact/mean"] + 0.5 * 0.3, abs=1e-6)
