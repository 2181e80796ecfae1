"""Tokenizer, base model and LoRA adapter loading: one path for hub models and locally built tiny models."""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from omegaconf import OmegaConf

from ao_calib.core.command_names import command
from ao_calib.core.errors import AOCalibError, ResourceUnavailableError
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed
from ao_calib.runtime.offline import env_flag
from ao_calib.steering.layout import decoder_layers_path, get_decoder_layers

if TYPE_CHECKING:
    from ao_calib.models.config import ModelConfig
    from ao_calib.models.config import LoraOverrideConfig

log = logging.getLogger(__name__)

OFFLINE_MODEL = "tiny_qwen3"


def offline_hint() -> str:
    """The command the user ran, with the tiny offline model instead of theirs; the quickstart outside a run."""
    import shlex

    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return f"For an offline run on this machine use: {command('run')} experiment=quickstart"
    overrides = [o for o in HydraConfig.get().overrides.task if not o.lstrip("+").startswith("model=")]
    return (f"For an offline run on this machine, the same with the tiny model: {command('run')} "
            + shlex.join([*overrides, f"model={OFFLINE_MODEL}"]))
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model_source(model_cfg: ModelConfig, cache_dir: str | Path) -> str:
    """Where ``from_pretrained`` reads the model: the tiny model's local checkpoint, the hub id/path, or the
    checkpoint converted from the model's packaged GGUF copy (``model.source`` chooses between the last two)."""
    if model_cfg.tiny is not None:
        from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model

        spec = TinyModelSpec(**_fields(model_cfg.tiny, TinyModelSpec))
        return str(ensure_tiny_model(spec, Path(cache_dir) / "tiny_models"))
    if not model_cfg.hub_id and getattr(model_cfg, "gguf", None) is None:
        raise AOCalibError(f"model={model_cfg.name}: set model.hub_id (a hub id or local path), model.gguf or "
                           "model.tiny.")
    if _from_gguf(model_cfg):
        from ao_calib.models.gguf import ensure_checkpoint

        packaged = packaged_gguf(model_cfg)
        if packaged.missing():
            raise ResourceUnavailableError(f"model={model_cfg.name} needs {packaged.missing()}")
        return str(ensure_checkpoint(packaged, cache_dir))
    return model_cfg.hub_id


def packaged_gguf(model_cfg: ModelConfig):
    from ao_calib.models.gguf import PackagedGGUF

    return PackagedGGUF(model_cfg.gguf.distribution, model_cfg.gguf.file)


def _source(model_cfg: ModelConfig) -> str:
    source = getattr(model_cfg, "source", None) or "auto"
    return getattr(source, "value", source)


def _from_gguf(model_cfg: ModelConfig) -> bool:
    """Whether the weights come from the packaged GGUF copy: always with ``model.source=gguf``; with ``auto``
    when the hub id is neither a local path, nor cached, nor reachable."""
    if getattr(model_cfg, "gguf", None) is None or _source(model_cfg) == "hub":
        return False
    return _source(model_cfg) == "gguf" or not model_cfg.hub_id or not hub_repo_available(model_cfg.hub_id)


def check_model_available(model_cfg: ModelConfig, adapter_id: str | None = None) -> None:
    """Stop at once, with one message, when the model needs a GPU or the hub and this machine has neither."""
    missing = missing_for_model(model_cfg, adapter_id)
    if missing:
        raise ResourceUnavailableError.lacking(f"model={model_cfg.name}", missing, offline_hint())


QUANTIZATIONS = ("4bit",)


def quantization_missing(model_cfg: ModelConfig) -> list[str]:
    """What ``model.quantization`` needs that this machine lacks: bitsandbytes' 4-bit weights run on CUDA only."""
    quantization = getattr(model_cfg, "quantization", None)
    if quantization is None:
        return []
    if quantization not in QUANTIZATIONS:
        raise AOCalibError(f"model.quantization={quantization!r}: choose one of {', '.join(QUANTIZATIONS)}, or null")
    if not torch.cuda.is_available():
        return [f"a CUDA GPU for model.quantization={quantization} (bitsandbytes' 4-bit weights run on CUDA only; "
                "on this machine leave model.quantization=null)"]
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        return [f"the bitsandbytes package for model.quantization={quantization} (pip install bitsandbytes)"]
    return []


def missing_for_model(model_cfg: ModelConfig, adapter_id: str | None = None) -> list[str]:
    """What the model and its adapter need that this machine lacks (a GPU, the hub), one phrase each."""
    missing = quantization_missing(model_cfg)
    if model_cfg.tiny is not None:
        return missing
    if model_cfg.requires_gpu and not torch.cuda.is_available():
        missing.append("a CUDA GPU (torch.cuda.is_available() is False)")
    if _from_gguf(model_cfg):
        packaged = packaged_gguf(model_cfg).missing()
        if packaged:
            hub = f"'{model_cfg.hub_id}'{NOT_ON_HUB}, or " if model_cfg.hub_id and _source(model_cfg) == "auto" else ""
            missing.append(f"{hub}its offline copy: {packaged}")
    elif model_cfg.hub_id and not hub_repo_available(model_cfg.hub_id):
        missing.append(f"'{model_cfg.hub_id}'" + NOT_ON_HUB)
    if adapter_id and not hub_repo_available(adapter_id):
        missing.append(f"'{adapter_id}'" + NOT_ON_HUB)
    return missing


NOT_ON_HUB = " (not in the local Hugging Face cache, and the hub cannot be reached; set HF_ENDPOINT or download it)"


def hub_repo_available(repo: str, repo_type: str = "model") -> bool:
    """A local path, a repository in the local Hugging Face cache, or a reachable hub."""
    return _locally_available(repo, repo_type) or _hub_reachable()


def _locally_available(repo: str, repo_type: str = "model") -> bool:
    if Path(repo).exists():
        return True
    if repo_type == "dataset":
        from huggingface_hub import scan_cache_dir

        try:
            return any(r.repo_id == repo and r.repo_type == "dataset" for r in scan_cache_dir().repos)
        except Exception:  # noqa: BLE001 -- no cache directory yet, or an unreadable one: not available
            return False
    from huggingface_hub import try_to_load_from_cache

    for filename in ("config.json", "adapter_config.json"):
        if isinstance(try_to_load_from_cache(repo, filename), str):
            return True
    return False


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    if env_flag("HF_HUB_OFFLINE"):
        return False
    host = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://")[-1].split("/")[0]
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def load_tokenizer(source: str, model_cfg: ModelConfig | None = None):
    """The tokenizer at ``source``, with the model config's chat template where it sets one. Template options the
    template never reads (``enable_thinking`` for a template without a thinking mode) are named in a warning:
    Jinja ignores them silently."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model_cfg is not None and getattr(model_cfg, "chat_template", None):
        tokenizer.chat_template = model_cfg.chat_template
    if model_cfg is not None and isinstance(tokenizer.chat_template, str):
        options = getattr(model_cfg, "chat_template_kwargs", None) or {}
        unread = [key for key in options if key not in tokenizer.chat_template]
        if unread:
            log.warning("model.chat_template_kwargs: the chat template of model=%s never reads %s; set "
                        "model.chat_template_kwargs={} for it", model_cfg.name, ", ".join(unread))
    return tokenizer


def torch_dtype(name: str) -> torch.dtype:
    """``model.dtype`` as a torch dtype."""
    if name not in _DTYPES:
        raise AOCalibError(f"model.dtype={name!r}: choose one of {sorted(_DTYPES)}")
    return _DTYPES[name]


def load_base_model(model_cfg: ModelConfig, source: str):
    from transformers import AutoModelForCausalLM

    dtype = torch_dtype(model_cfg.dtype)
    if dtype != torch.float32 and not torch.cuda.is_available():
        log.warning("model.dtype=%s on CPU is slow and imprecise; using float32", model_cfg.dtype)
        dtype = torch.float32
    quantized = getattr(model_cfg, "quantization", None) == "4bit"
    extra = {}
    if quantized:  # QLoRA: NF4 base weights, compute in the model's dtype; placed on the GPU at load
        from transformers import BitsAndBytesConfig

        extra = {"quantization_config": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype), "device_map": {"": distributed.local_rank()}}
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=dtype, attn_implementation=model_cfg.attn_implementation, **extra
    )
    # This process's own device (cuda:LOCAL_RANK), as accelerate assigns it. A 4-bit model was loaded in place; a
    # model to be sharded (FSDP, ZeRO-3) stays where it is until the trainer's accelerator shards it.
    if torch.cuda.is_available() and not quantized and not distributed.sharded():
        model.to(distributed.device())
    return model


def lora_settings(model_cfg: ModelConfig, lora_overrides: LoraOverrideConfig | None = None) -> dict:
    """The model's LoRA defaults (``model.lora``) with the run's non-null overrides (``trainer.lora``) applied."""
    from ao_calib.models.config import LoraConfig
    from ao_calib.models.config import LoraOverrideConfig

    settings = _fields(model_cfg.lora, LoraConfig)
    overrides = _fields(lora_overrides, LoraOverrideConfig) if lora_overrides is not None else {}
    settings.update({key: value for key, value in overrides.items() if value is not None})
    return settings


def _fields(settings, schema: type) -> dict:
    """``settings``' values of ``schema``'s fields, by name: the runner passes its typed settings, a script may
    pass the composed config's node."""
    return {name: getattr(settings, name) for name in schema.__dataclass_fields__}


def lora_target_regex(decoder_layers_path: str, num_layers: int, module_names: list[str], last_n: int | None) -> str:
    """A peft target regex restricted to the decoder layers.

    Anchoring on the decoder-layer path keeps LoRA off look-alike modules elsewhere (Gemma 3's SigLIP vision
    tower also has q_proj/k_proj/...), and selecting layer indices here implements ``model.lora.layers``.
    """
    if last_n is not None and last_n > num_layers:
        log.warning("LoRA layers=%d > %d decoder layers: using all of them", last_n, num_layers)
    first = 0 if last_n is None else max(0, num_layers - last_n)
    indices = "|".join(str(i) for i in range(first, num_layers))
    names = "|".join(re.escape(n) for n in module_names)
    return rf"^{re.escape(decoder_layers_path)}\.({indices})\..*\b({names})$"


def attach_lora(model, model_cfg: ModelConfig, lora_overrides=None, pretrained_adapter: str | None = None):
    """Wrap the model with a trainable adapter: ``pretrained_adapter`` (hub id or path) if given, else a new LoRA
    (``model.lora`` with the run's ``trainer.lora`` overrides)."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if pretrained_adapter:
        return PeftModel.from_pretrained(model, pretrained_adapter, is_trainable=True)
    lora = lora_settings(model_cfg, lora_overrides)
    layers_path = decoder_layers_path(model)
    num_layers = len(get_decoder_layers(model))
    peft_config = LoraConfig(
        r=lora["rank"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=lora_target_regex(
            layers_path, num_layers, lora["target_modules"], lora.get("layers")
        ),
        # Whole modules trained beside LoRA (e.g. the embeddings of a random tiny model, which LoRA cannot fix);
        # a trained embedding stays tied to the output layer that shares its weight.
        modules_to_save=list(lora.get("modules_to_save") or []) or None,
        ensure_weight_tying=bool(lora.get("modules_to_save")) and bool(
            getattr(model.config.get_text_config(), "tie_word_embeddings", False)),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, peft_config)


def describe(model, model_cfg: ModelConfig, source: str) -> dict:
    """What a run trained, for its summary: the config's name, the architecture, where the weights came from and
    the parameter counts (the base model's, without the adapter, and the trainable ones)."""
    from ao_calib.steering.layout import unwrap

    base = unwrap(model)
    added = ("lora_", "modules_to_save")  # the adapter's own weights and peft's trained copies of whole modules
    return {"name": model_cfg.name, "class": type(base).__name__, "source": source,
            "parameters": sum(p.numel() for n, p in model.named_parameters() if not any(a in n for a in added)),
            "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def resolve_init_adapter(init_from: str, model_cfg: ModelConfig) -> str:
    """``trainer.init_from``: a run directory (its ``adapter/``), a checkpoint or an adapter directory. Refuses an
    adapter trained on another model, when the run's config says which."""
    from ao_calib.models.config import TinyModelConfig

    path = Path(init_from)
    adapter = next((p for p in (RunDir(path).adapter, path) if (p / "adapter_config.json").is_file()), None)
    if adapter is None:
        raise AOCalibError(f"trainer.init_from={init_from}: no adapter there (looked for "
                           f"{RunDir.ADAPTER}/adapter_config.json and adapter_config.json); did that run finish?")
    for folder in (path, *path.parents[:2]):
        config = RunDir(folder).config
        if config.is_file():
            trained = OmegaConf.load(config).get("model") or {}
            for key in ("name", "hub_id", "tiny"):
                theirs, ours = trained.get(key), getattr(model_cfg, key)
                theirs = OmegaConf.to_container(theirs) if OmegaConf.is_config(theirs) else theirs
                if ours is not None and key == "tiny":
                    ours = _fields(ours, TinyModelConfig)
                if theirs != ours:
                    raise AOCalibError(f"trainer.init_from={init_from} was trained with model.{key}={theirs}, but "
                                       f"this run has model.{key}={ours}")
            break
    log.info("starting from the adapter in %s", adapter)
    return str(adapter)


def load_trained_model(model_cfg: ModelConfig, source: str, adapter_dir: str | Path):
    """Base model + a saved adapter, for evaluation."""
    from peft import PeftModel

    return PeftModel.from_pretrained(load_base_model(model_cfg, source), str(adapter_dir))

