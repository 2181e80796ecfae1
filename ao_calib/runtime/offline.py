"""A run that needs nothing from the network looks nothing up, and leaves nothing in the system's temp directory.

Hugging Face libraries send usage pings from a background thread (which resolves the hub's host name even for a
model built locally), and wandb's client asks its server about telemetry even for an offline run; on a machine
without network each lookup can stall. Libraries also leave temporary folders behind (wandb's ``wandb-media``
and ``wandb-artifacts``) when a process ends without running its finalizers.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from omegaconf import DictConfig

log = logging.getLogger(__name__)


def env_flag(name: str) -> bool:
    """A yes/no environment variable as the Hugging Face libraries read it (1, true, yes or on, any case)."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


# Set for every run: no usage pings (the user can still set these to 0 to opt back in).
ALWAYS = {"HF_HUB_DISABLE_TELEMETRY": "1", "WANDB_ERROR_REPORTING": "false"}
# Set when the model is built locally (model.tiny) or read from its packaged copy (model.source=gguf): the hub is
# never needed for it.
LOCAL_MODEL = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def keep_offline(cfg: DictConfig) -> dict[str, str]:
    """Sets the variables above that the user has not set; returns those it set. Call before the model loads."""
    wanted = dict(ALWAYS)
    source = cfg.model.get("source")
    local = cfg.model.get("tiny") is not None or getattr(source, "value", source) == "gguf"
    if (local and not cfg.model.get("ao_lora_id") and not cfg.trainer.get("init_from")
            and not _in_sweep()):  # a sweep's jobs share one process: a later job may need the hub
        wanted.update(LOCAL_MODEL)
    if cfg.logger.name == "wandb" and _wandb_offline(cfg):
        wanted["WANDB_MODE"] = "offline"
    applied = {key: value for key, value in wanted.items() if key not in os.environ}
    os.environ.update(applied)
    _update_imported_constants()
    if "HF_HUB_OFFLINE" in applied:
        log.info("model=%s is local: the model hub is not contacted (HF_HUB_OFFLINE=0 to allow it)",
                 cfg.model.name)
    return applied


def _in_sweep() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def wandb_credentials() -> bool:
    """Whether wandb can log online: an API key in the environment or wandb's entry in the netrc file."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    return netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore")


def _wandb_offline(cfg: DictConfig) -> bool:
    return cfg.logger.mode == "offline" or (cfg.logger.mode == "auto" and not wandb_credentials())


def _update_imported_constants() -> None:
    """huggingface_hub reads its variables once, at import; an import before this call must see them too."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is None:
        return
    constants.HF_HUB_DISABLE_TELEMETRY = constants.HF_HUB_DISABLE_TELEMETRY or env_flag("HF_HUB_DISABLE_TELEMETRY")
    constants.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE or env_flag("HF_HUB_OFFLINE")


def private_temp_dir() -> str:
    """Points this process and its children at a fresh temp folder, removed when the process exits, so folders a
    library forgets there go with it."""
    path = tempfile.mkdtemp(prefix="ao_calib-run-")
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
