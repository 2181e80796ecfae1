"""Finished tiny runs that several test modules point their commands at, each run once per test process."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.commands import assert_ok
from tests.helpers.paths import PROJECT_ROOT

# Refuses (and records) every name lookup but the loopback's, in the process and any child it starts.
REFUSE_LOOKUPS = '''
import os, socket, traceback
_real = socket.getaddrinfo
def _refuse(host, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name not in ("localhost", "127.0.0.1", "::1"):
        with open(os.environ["LOOKUP_LOG"], "a") as f:
            f.write(name + "\\n" + "".join(traceback.format_stack(limit=25)) + "\\n")
        raise socket.gaierror(socket.EAI_NONAME, "name lookup refused by the test: " + name)
    return _real(host, *args, **kwargs)
socket.getaddrinfo = _refuse
'''
# What the session's environment sets for every test; the run must get there by itself.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "WANDB_MODE",
                     "HF_HUB_DISABLE_TELEMETRY", "WANDB_ERROR_REPORTING", "WANDB_API_KEY")


def refusing_env(root: Path) -> dict[str, str]:
    """The test environment less its offline variables, with every name lookup refused and logged to
    ``root/lookups.log`` (through ``root/site/sitecustomize.py``, which only a fresh interpreter loads)."""
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(REFUSE_LOOKUPS)
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARIABLES}
    env.update(PYTHONPATH=str(root / "site"), LOOKUP_LOG=str(root / "lookups.log"))
    return env


@functools.cache
def offline_function_call_run(root: Path) -> tuple[Path, Path, Path]:
    """A tiny function-calling GRPO run with wandb (one step, two evaluation samples), with no offline variable set
    and every name lookup refused, made once under ``root``: ``(run dir, lookup log, its temp dir)``. Callers that
    write into the run work on a copy (``copy_run``), so each sees it as it was finished."""
    root.mkdir(parents=True)
    (root / "tmp").mkdir()
    # torch's compile cache goes where it goes once peft is imported in the test process (which sets this
    # variable), not into the run's temp folder, whatever the tests imported before
    env = {**refusing_env(root), "TMPDIR": str(root / "tmp"),
           "TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR", str(root / "torchinductor"))}
    run = root / "run"
    result = subprocess.run(
        [sys.executable, "-m", "ao_calib.run", "experiment=function_call_tiny", "trainer.max_steps=1",
         "eval.num_samples=2", "logger=wandb", f"hydra.run.dir={run}"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert_ok(result)
    return run, root / "lookups.log", root / "tmp"


def copy_run(run: Path, to: Path) -> Path:
    """A copy of a finished run at ``to`` (its parent folders made), for a test that writes into it."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(run, to, symlinks=True)
    return to
