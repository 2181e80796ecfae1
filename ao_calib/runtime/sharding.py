"""One sharded model for a whole run: sharded once, before anything reads it, and used by every step after.

Under accelerate's FSDP2 (``conf/accelerate/fsdp2.yaml``, ``hydra/launcher=slurm_fsdp2``) the run shards the model
right after it loads, with accelerate's own preparation: activation extraction, every evaluation and every stage's
trainer then run the one sharded model (accelerate returns a model it has already sharded as it is, so the warm-up
and the main stage share one wrapping), and generation gathers the parameters layer by layer as the trainer's own
generation does (``generate`` registered as an FSDP forward method). With ``cpu_ram_efficient_loading``, that
preparation is also where every process receives the main process's weights.

DeepSpeed ZeRO-3 builds its engine with the stage's optimizer, so it cannot be prepared ahead: each process holds
the whole model (loaded whole: ``zero3_init_flag`` is off) until the first trainer partitions it, and a second stage
is refused at start-up (``check_stages``).
"""

from __future__ import annotations

import os

from omegaconf import DictConfig, OmegaConf

from ao_calib.core.errors import AOCalibError
from ao_calib.runtime import distributed


def zero3() -> bool:
    """Launched with a DeepSpeed ZeRO stage 3 config (the variables ``accelerate launch`` sets from it)."""
    from accelerate.utils import parse_flag_from_env

    return parse_flag_from_env("ACCELERATE_USE_DEEPSPEED") and os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"


def check_stages(cfg: DictConfig) -> None:
    """At start-up, before any model loads: no warm-up under ZeRO-3. Each stage's trainer builds its own DeepSpeed
    engine, and a second engine over parameters the first one partitioned manages them twice (a known failure:
    Lightning-AI/pytorch-lightning#17523)."""
    if cfg.get("warmup") is not None and zero3():
        raise AOCalibError(
            f"warmup={cfg.warmup.name} cannot run under DeepSpeed ZeRO-3 (conf/accelerate/zero3.yaml): each stage "
            "would build its own DeepSpeed engine over the one partitioned model. Use conf/accelerate/fsdp2.yaml "
            "(both stages share one sharded model), or drop the warm-up and start from a finished run's adapter "
            "(trainer.init_from=<run directory>)")
    loss = OmegaConf.select(cfg, "warmup.confidence_loss", default=None)
    if loss == "calibration" and distributed.sharded():  # a str enum member equals its value
        raise AOCalibError("warmup.confidence_loss=calibration cannot run on a sharded model (FSDP, DeepSpeed): its "
                           "term reads the LM head outside the sharded forward pass; set "
                           "warmup.confidence_loss=cross_entropy or launch without a sharding config")


def prepare(model, bf16: bool):
    """``model`` sharded by accelerate's FSDP2 when the run is launched with it, ready for generation; as it is
    otherwise. GPUs only: accelerate selects FSDP for GPU-like devices alone (a CPU process's state is
    ``DistributedType.NO``, or MULTI_CPU, with no FSDP plugin), so a CPU run keeps the model whole on every
    process. ``bf16``: the stages' ``TrainingArguments.bf16``, so this accelerator and the trainers' agree on
    mixed precision (accelerate refuses a second setting)."""
    if not (distributed.is_distributed() and distributed.sharded()):
        return model
    from accelerate import Accelerator
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model
    from transformers.integrations.fsdp import update_fsdp_plugin_peft

    accelerator = Accelerator(mixed_precision="bf16" if bf16 else None)  # None: the launcher's, as the trainers read
    if not accelerator.is_fsdp2:
        return model
    update_fsdp_plugin_peft(model, accelerator)  # the LoRA layers wrapped on their own, as the trainer does
    return for_generation(fsdp2_prepare_model(accelerator, model))


def for_generation(model):
    """``model.generate`` gathering the parameters of an FSDP2-sharded model (as transformers' Trainer registers
    it at the start of training; evaluation generates before that). A model not sharded by FSDP2 is left as it
    is; registering twice is avoided (each registration wraps the method once more)."""
    from torch.distributed.fsdp import FSDPModule, register_fsdp_forward_method

    if isinstance(model, FSDPModule) and "generate" not in vars(model):
        register_fsdp_forward_method(model, "generate")
    return model
