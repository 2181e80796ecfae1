"""A run starts its own wandb service, whatever service a parent process left in its environment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.paths import PROJECT_ROOT

START = """
import sys
import wandb  # imported before the run starts wandb, as in every run (transformers' is_wandb_available imports it)
from omegaconf import OmegaConf
from ao_calib.monitoring.wandb import init_wandb
cfg = OmegaConf.create({"run_name": "service", "logger": {"name": "wandb", "mode": "offline", "project": "p",
                        "entity": None, "tags": [], "init_timeout_s": 60.0}})
print("RUN_ID", init_wandb(cfg, sys.argv[1]))
"""


def test_a_run_ignores_the_wandb_service_a_parent_process_left_in_its_environment(tmp_path):
    """A parent that used wandb (a notebook, a driver script, a test process) hands its children WANDB_SERVICE; a
    run that joined that service could not resume its wandb run after a kill -9 (the parent's service still holds
    the run id). Here the parent is gone and its socket with it: joining it would leave the run without wandb."""
    pytest.importorskip("wandb")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WANDB_SILENT": "true",
           "WANDB_SERVICE": f"3-999999-unix-{tmp_path / 'gone.sock'}"}
    out = subprocess.run([sys.executable, "-c", START, str(tmp_path)], check=False, cwd=PROJECT_ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    run_id = out.stdout.split("RUN_ID ", 1)[1].strip()
    assert run_id != "None" and (tmp_path / "wandb").is_dir(), out.stderr[-3000:]
