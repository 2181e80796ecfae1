"""Start-up refusals for sharded launches: a warm-up under DeepSpeed ZeRO-3 (each stage would build its own engine
over the one partitioned model) stops before any model loads, naming the keys. (Sharded extraction and evaluation
run over two real processes in tests/test_distributed.py.)"""

from __future__ import annotations

import pytest

from ao_calib import sharding
from ao_calib.config import compose_run_config
from ao_calib.errors import AOCalibError
from tests.conftest import run_cli

ZERO3 = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}  # what accelerate launch sets


def test_a_warm_up_under_zero3_is_refused_at_start_up_naming_the_keys(tmp_path):
    result = run_cli("ao_calib.run", "experiment=oracle_tiny", f"paths.output_dir={tmp_path}", env=ZERO3, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "warmup=sft cannot run under DeepSpeed ZeRO-3" in result.stderr
    assert "conf/accelerate/fsdp2.yaml" in result.stderr and "trainer.init_from" in result.stderr
    assert "Loading weights" not in result.stderr  # refused before any model loads


@pytest.mark.parametrize("env, overrides", [
    (ZERO3, ["experiment=function_call_tiny"]),  # no warm-up: one engine
    ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}, ["experiment=oracle_tiny"]),
    ({"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2"}, ["experiment=oracle_tiny"]),  # both stages, one model
])
def test_other_sharded_launches_keep_their_warm_up(monkeypatch, env, overrides):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    sharding.check_stages(compose_run_config(overrides))


def test_the_check_reads_the_launch(monkeypatch):
    cfg = compose_run_config(["experiment=oracle_tiny"])
    sharding.check_stages(cfg)  # no launcher variables: one process
    for key, value in ZERO3.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(AOCalibError, match="warmup=sft"):
        sharding.check_stages(cfg)


def test_the_calibration_warm_up_loss_is_refused_on_a_sharded_model(monkeypatch):
    """warmup.confidence_loss=calibration reads the LM head outside the forward pass: refused under FSDP at
    start-up, kept on one process."""
    cfg = compose_run_config(["experiment=oracle_smollm2", "warmup.confidence_loss=calibration"])
    sharding.check_stages(cfg)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(AOCalibError, match="warmup.confidence_loss=calibration cannot run on a sharded model"):
        sharding.check_stages(cfg)
    sharding.check_stages(compose_run_config(["experiment=oracle_smollm2", "warmup.confidence_loss=cross_entropy",
                                                "warmup.calibration_expected_over_draw=false"]))
