"""Running ``python -m ...`` as a user would, and checking that it worked."""

from __future__ import annotations

import functools
import os
import subprocess

from tests.helpers.cli_zygote import run_module
from tests.helpers.paths import PROJECT_ROOT


def run_cli(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs ``python -m ...`` from the project root, as a user would (``env`` adds variables): in a process of its
    own, forked where it can be from one that has already imported the heavy libraries (tests/helpers/cli_zygote.py)."""
    return run_module(PROJECT_ROOT, args[0], list(args[1:]), {**os.environ, **(env or {})}, timeout)


def assert_ok(result):
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"


@functools.cache
def help_page(module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` for ARGS that ask for a --help page, in the test environment: run once per test
    process for every test that reads that page (it writes nothing, so each reader gets the same output)."""
    assert "--help" in args, args
    return run_cli(module, *args)
