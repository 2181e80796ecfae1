"""The tests' command runner (tests/helpers/cli_zygote.py): a forked run behaves as a subprocess would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import cli_zygote
from tests.helpers.paths import PROJECT_ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or os.environ.get("AO_CALIB_TEST_FORK") == "0",
                                reason="runs are not forked here")


def probe(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return cli_zygote.run_module(PROJECT_ROOT, "tests.cli_probe", list(args), {**os.environ, **(env or {})},
                                 timeout)


def fields(result: subprocess.CompletedProcess) -> dict[str, str]:
    return dict(part.split("=", 1) for part in result.stdout.split())


def test_a_forked_run_has_its_own_status_output_and_directory():
    first = probe("exit=3")
    server = cli_zygote._zygote.server.pid
    seen = fields(first)
    assert first.returncode == 3
    assert seen["ppid"] == str(server), "not forked from the command server"
    assert seen["cwd"] == str(PROJECT_ROOT) and seen["argv0"] == "cli_probe.py"
    assert first.stderr.strip() == "to stderr"
    message = probe("message=stopped here")
    assert message.returncode == 1 and message.stderr.splitlines()[-1] == "stopped here"
    crash = probe("raise")
    assert crash.returncode == 1 and "RuntimeError: probe failed" in crash.stderr
    assert probe().returncode == 0 and fields(probe())["ppid"] == str(server)


def test_a_run_past_its_timeout_is_stopped_and_raises():
    with pytest.raises(subprocess.TimeoutExpired):
        probe("sleep=60", timeout=1)
    assert probe("exit=0").returncode == 0, "the server serves the next run"


def test_another_environment_gets_a_plain_subprocess_that_sees_it():
    probe()  # the server exists, started with this environment
    result = probe(env={"AO_CALIB_PROBE": "changed"})
    assert fields(result)["probe"] == "changed"
    assert fields(result)["ppid"] == str(os.getpid())


def test_a_run_time_variable_or_pythonpath_of_its_own_is_still_forked_and_seen_as_a_subprocess_sees_it(tmp_path):
    """The variables nothing reads at import (cli_zygote.RUN_TIME_VARIABLES) a forked run sets itself, PYTHONPATH
    as its folders on sys.path where a fresh interpreter puts them."""
    probe()
    env = {"AO_CALIB_PROBE_KEY": "secret", "PYTHONPATH": os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")])}
    forked = probe(env=env)
    assert fields(forked)["ppid"] == str(cli_zygote._zygote.server.pid)
    fresh = subprocess.run([sys.executable, "-m", "tests.cli_probe"], check=False, cwd=PROJECT_ROOT,
                           capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert fields(forked)["key"] == fields(fresh)["key"] == "secret"
    assert json.loads(fields(forked)["path"]) == json.loads(fields(fresh)["path"])
    assert json.loads(fields(forked)["path"])[1:3] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert json.loads(fields(probe())["path"])[1:3] != [str(tmp_path / "a"), str(tmp_path / "b")]  # not left behind
