"""``trainer.use_vllm=true`` is refused at start-up with one message (exit 2), before any model loads and before the
initial evaluation: for a task that injects activations, and when vLLM is not installed."""

from __future__ import annotations

import importlib.util

import pytest

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from tests.helpers.commands import run_cli

NO_VLLM = importlib.util.find_spec("vllm") is None


def test_the_oracle_refuses_vllm_when_the_config_is_composed():
    with pytest.raises(AOCalibError, match="vLLM cannot run the activation-steering hooks"):
        compose_run_config(["experiment=oracle_tiny", "trainer.use_vllm=true"])


@pytest.mark.skipif(not NO_VLLM, reason="vLLM is installed here")
@pytest.mark.parametrize("overrides", [["task=function_call", "model=tiny_qwen3"],
                                       ["experiment=tool_json_smollm2_multiturn"]])  # tools inside the rollouts
def test_a_missing_vllm_is_named_when_the_config_is_composed(overrides):
    with pytest.raises(AOCalibError, match=r"vLLM is not installed.*\.\[vllm\]"):
        compose_run_config([*overrides, "trainer.use_vllm=true"])


def test_vllm_off_composes():
    compose_run_config(["task=function_call", "model=tiny_qwen3"])


@pytest.mark.parametrize("overrides,message", [
    (["experiment=oracle_tiny"], "vLLM cannot run the activation-steering hooks"),
    pytest.param(["task=function_call", "model=tiny_qwen3"], "vLLM is not installed",
                 marks=pytest.mark.skipif(not NO_VLLM, reason="vLLM is installed here")),
])
def test_the_run_stops_with_one_message_before_any_model_loads(tmp_path, overrides, message):
    result = run_cli("ao_calib.run", *overrides, "trainer.use_vllm=true", f"hydra.run.dir={tmp_path}", timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in result.stderr
    everything = result.stdout + result.stderr
    assert "Loading weights" not in everything and "[eval:" not in everything  # no model, no initial evaluation
