"""``model.quantization=4bit`` (QLoRA through bitsandbytes) needs CUDA: on a CPU machine the run stops at start-up
with one message naming the key (exit 2), before any model is loaded."""

import pytest
import torch

from tests.helpers.commands import run_cli


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_4bit_is_refused_on_cpu_before_loading(tmp_path):
    out = tmp_path / "run"
    result = run_cli("ao_calib.run", "experiment=function_call_tiny", "model.quantization=4bit",
                     f"hydra.run.dir={out}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "model.quantization=4bit" in result.stderr and "CUDA GPU" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (out / "adapter").exists() and not (out / "metrics.jsonl").exists()


def test_unknown_quantization_is_named():
    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError
    from ao_calib.models.loading import check_model_available

    cfg = compose_run_config(["experiment=function_call_tiny", "model.quantization=3bit"])
    with pytest.raises(AOCalibError, match="model.quantization='3bit'"):
        check_model_available(cfg.model)
