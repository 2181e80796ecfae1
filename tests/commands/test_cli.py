"""The `ao-calib` console script: each subcommand is the same command as `python -m ao_calib.<command>`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from ao_calib.cli import COMMANDS
from tests.helpers.commands import run_cli
from tests.helpers.paths import PROJECT_ROOT

SCRIPT = Path(sys.executable).parent / "ao-calib"


def test_the_console_script_is_declared_and_installed():
    scripts = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"ao-calib": "ao_calib.cli:main"}
    assert SCRIPT.is_file(), "reinstall the package (pip install -e .) to create the ao-calib script"
    assert "from ao_calib.cli import main" in SCRIPT.read_text()


def test_ao_calib_run_composes_as_python_m_does():
    args = ["experiment=quickstart", "trainer.max_steps=3", "--cfg", "job"]
    script = subprocess.run([str(SCRIPT), "run", *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                            timeout=300, check=False)
    assert script.returncode == 0, script.stderr[-3000:]
    module = run_cli("ao_calib.run", *args)
    assert module.returncode == 0, module.stderr[-3000:]
    composed = yaml.safe_load(script.stdout)
    assert composed == yaml.safe_load(module.stdout)
    assert composed["trainer"]["max_steps"] == 3 and composed["run_name"] == "quickstart"


@pytest.mark.parametrize("command", [name for name in COMMANDS if name != "run"])
def test_each_subcommand_answers_its_own_help(command):
    result = run_cli("ao_calib.cli", command, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"usage: ao-calib {command} ")  # named as the user started it
    assert COMMANDS[command][0].rsplit(".", 1)[-1] in result.stdout


def test_run_help_narrows_to_one_key_through_the_script():
    result = run_cli("ao_calib.cli", "run", "--help", "trainer.lr")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0] == "trainer.lr"


def test_hints_name_the_command_as_the_user_started_it():
    script = run_cli("ao_calib.cli", "eval", "run_dir=x", "nmu_samples=3")
    module = run_cli("ao_calib.eval", "run_dir=x", "nmu_samples=3")
    assert script.returncode == module.returncode == 2
    assert "nmu_samples: no such option of ao-calib eval;" in script.stderr
    assert "nmu_samples: no such option of python -m ao_calib.eval;" in module.stderr


def test_an_unknown_or_missing_command_is_refused_with_the_list():
    wrong = run_cli("ao_calib.cli", "evl", "run_dir=x")
    assert wrong.returncode == 2
    assert wrong.stderr.splitlines()[-1] == ("error: no command 'evl'. Did you mean eval? Commands: "
                                             + ", ".join(COMMANDS))
    missing = run_cli("ao_calib.cli")
    assert missing.returncode == 2 and "usage: ao-calib <command>" in missing.stderr
    listed = run_cli("ao_calib.cli", "--help")
    assert listed.returncode == 0 and all(f"  {name} " in listed.stdout for name in COMMANDS)
