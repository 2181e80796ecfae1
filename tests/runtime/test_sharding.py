"""Start-up refusals for sharded launches: a warm-up under DeepSpeed ZeRO-3 (each stage would build its own engine
over the one partitioned model) stops before any model loads, naming the keys. ``sharding.prepare`` under the FSDP2
launch on two real CPU processes, where accelerate does not shard (the sharded path needs GPUs). (Sharded
extraction and evaluation run over two real processes, sharded by torch's ``fully_shard``, in
tests/runtime/test_distributed.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.runtime import sharding
from tests.helpers.commands import run_cli
from tests.helpers.paths import CONF_DIR

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


def fsdp2_launch_environment(processes: int) -> dict[str, str]:
    """The variables ``accelerate launch --config_file conf/accelerate/fsdp2.yaml`` gives each process, as
    accelerate's own launcher derives them."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", str(CONF_DIR / "accelerate" / "fsdp2.yaml"),
                                               "--num_processes", str(processes), "-m", "ao_calib.run"])
    return prepare_multi_gpu_env(_validate_launch_command(args)[0])


def base_weight_sum(model) -> float:
    """The base model's weights summed (the LoRA matrices left out): equal only where the weights are."""
    return sum(float(p.detach().double().sum()) for n, p in model.named_parameters() if "lora_" not in n)


def _prepare_under_the_fsdp2_launch(rank: int, port: int, out: str) -> None:
    """One process of a two-process FSDP2 launch on CPU: the tiny LoRA model loaded and prepared as ao_calib.run
    does it, and what accelerate made of the launch."""
    os.environ.update(fsdp2_launch_environment(2))
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    import torch
    import torch.distributed as dist
    from accelerate import Accelerator
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor

    from ao_calib.models import loading as models
    from ao_calib.runtime import distributed
    from ao_calib.trainers.common import uses_bf16

    ranks = distributed.all_gather(rank)  # the process group, up before the model loads (as in a run)
    cfg = compose_run_config(["experiment=function_call_tiny"])
    torch.manual_seed(0)  # the same LoRA initialisation on both processes
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora)
    prepared = sharding.prepare(model, uses_bf16(cfg.model))
    try:  # what accelerate's FSDP2 preparation does with this process's accelerator
        fsdp2_prepare_model(Accelerator(), model)
        refusal = None
    except AttributeError as exc:
        refusal = str(exc)
    Path(out, f"{rank}.json").write_text(json.dumps({
        "ranks": ranks, "same": prepared is model, "fsdp": isinstance(prepared, FSDPModule),
        "dtensors": sum(isinstance(p, DTensor) for p in prepared.parameters()),
        "distributed_type": str(Accelerator().distributed_type), "refusal": refusal,
        "weights": base_weight_sum(prepared)}))
    dist.destroy_process_group()


def test_prepare_under_an_fsdp2_launch_on_cpu_keeps_every_process_whole(tmp_path):
    """``prepare`` under the FSDP2 launch (accelerate's variables for conf/accelerate/fsdp2.yaml), in two real gloo
    processes on CPU. accelerate shards with FSDP only on GPU-like devices: a CPU process's state is
    ``DistributedType.NO`` (MULTI_CPU with ``cpu=True``), never FSDP, so ``is_fsdp2`` is false and it has no FSDP
    plugin; ``fsdp2_prepare_model`` itself raises AttributeError ("`AcceleratorState` object has no attribute
    `fsdp_plugin`"). The sharded path runs on GPUs only; here ``prepare`` keeps the model whole on every process,
    each with the main process's weights although the launch asks for ``cpu_ram_efficient_loading`` (whose
    weight broadcast is part of the FSDP preparation that does not run)."""
    from ao_calib.models import loading as models
    from tests.helpers.processes import spawn_two

    cfg = compose_run_config(["experiment=function_call_tiny"])
    source = models.model_source(cfg.model, cfg.paths.cache_dir)  # built once, before both processes load it
    want = base_weight_sum(models.load_base_model(cfg.model, source))
    assert fsdp2_launch_environment(2)["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "true"
    spawn_two(_prepare_under_the_fsdp2_launch, tmp_path, timeout=180)  # a hang fails the test, not CI
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    for r in results:
        assert r["ranks"] == [0, 1]
        assert r["distributed_type"] == "DistributedType.NO"
        assert r["same"] and not r["fsdp"] and r["dtensors"] == 0
        assert r["refusal"] is not None and "fsdp_plugin" in r["refusal"]
    assert [r["weights"] for r in results] == [want, want]  # every process holds the checkpoint's weights
