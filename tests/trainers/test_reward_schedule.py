"""Reward mixes: validation of names and phases, and the weights in force at each step."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ao_calib.config.schema import RewardConfig
from ao_calib.core.errors import AOCalibError
from ao_calib.rewards import build_reward_schedule
from ao_calib_tasks.function_call.rewards import REWARD_FUNCTIONS


def reward_cfg(**fields):
    return OmegaConf.merge(OmegaConf.structured(RewardConfig), {"name": "test", **fields})


def test_single_mix_is_one_open_phase():
    s = build_reward_schedule(reward_cfg(weights={"tool_call_exact": 0.3, "tool_call_function": 0.7}),
                              REWARD_FUNCTIONS)
    assert s.names == ("tool_call_exact", "tool_call_function")
    assert s.weights_at(0) == s.weights_at(10_000) == (0.3, 0.7)


def test_progressive_phases_switch_by_step():
    s = build_reward_schedule(reward_cfg(phases=[
        {"until_step": 100, "weights": {"tool_call_function": 0.8, "tool_call_parseable": 0.2}},
        {"until_step": 300, "weights": {"tool_call_function": 0.5, "tool_call_params": 0.5}},
        {"until_step": None, "weights": {"tool_call_exact": 0.7, "tool_call_overall": 0.3}},
    ]), REWARD_FUNCTIONS)
    assert s.names == ("tool_call_function", "tool_call_parseable", "tool_call_params", "tool_call_exact",
                       "tool_call_overall")
    assert s.weights_at(0) == s.weights_at(99) == (0.8, 0.2, 0.0, 0.0, 0.0)
    assert s.weights_at(100) == s.weights_at(299) == (0.5, 0.0, 0.5, 0.0, 0.0)
    assert s.weights_at(300) == s.weights_at(5000) == (0.0, 0.0, 0.0, 0.7, 0.3)
    assert [s.phase_index(k) for k in (0, 100, 300)] == [0, 1, 2]


def test_unknown_reward_name_lists_the_available_ones():
    with pytest.raises(AOCalibError, match="unknown reward function 'tool_call_exactt'.*tool_call_exact"):
        build_reward_schedule(reward_cfg(weights={"tool_call_exactt": 1.0}), REWARD_FUNCTIONS)


@pytest.mark.parametrize("phases", [
    [{"until_step": None, "weights": {"tool_call_exact": 1.0}}, {"until_step": 5, "weights": {"tool_call_exact": 1.0}}],
    [{"until_step": 5, "weights": {"tool_call_exact": 1.0}}, {"until_step": 5, "weights": {"tool_call_exact": 1.0}}],
    [{"until_step": None, "weights": {}}],
])
def test_malformed_phases_are_refused(phases):
    with pytest.raises(AOCalibError):
        build_reward_schedule(reward_cfg(phases=phases), REWARD_FUNCTIONS)


def test_weights_and_phases_together_are_refused():
    with pytest.raises(AOCalibError, match="either"):
        build_reward_schedule(reward_cfg(weights={"tool_call_exact": 1.0},
                                         phases=[{"until_step": None, "weights": {"tool_call_exact": 1.0}}]),
                              REWARD_FUNCTIONS)
