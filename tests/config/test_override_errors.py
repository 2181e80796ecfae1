"""An override a run cannot take is refused in the project's words, before Hydra makes a run directory: a misspelt
key names the closest keys (never Hydra's `+key=...`, which would add the misspelt key), a misspelt group option
lists only the options a user can pick, and `--cfg job` refuses what a run refuses, with the same message."""

from __future__ import annotations

import pytest
import yaml

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.eval import apply_task_overrides
from tests.helpers.commands import assert_ok, run_cli


def refused(tmp_path, *args: str, module: tuple[str, ...] = ("ao_calib.run",)):
    """``args`` run with their runs' directories under ``tmp_path``: the error line; none of them may make one."""
    result = run_cli(*module, *args, f"paths.output_dir={tmp_path / 'outputs'}", "hydra.sweep.dir=" + str(tmp_path))
    assert result.returncode == 2, result.stderr[-2000:]
    assert not (tmp_path / "outputs").exists() and list(tmp_path.iterdir()) == []
    assert "Traceback" not in result.stderr and "HYDRA_FULL_ERROR" not in result.stderr
    return result.stderr.splitlines()[-1], result.stdout + result.stderr


def test_a_misspelt_key_names_the_closest_and_never_suggests_appending_it(tmp_path):
    line, output = refused(tmp_path, "trainer.lrr=1e-5")
    assert line.startswith("error: unknown config key(s): trainer.lrr (did you mean trainer.lr,"), line
    assert "+trainer.lrr" not in output
    appended, _ = refused(tmp_path, "+trainer.lrr=1e-5")  # let in by Hydra, refused by the run's own check
    assert appended == line
    elsewhere, _ = refused(tmp_path, "trainer=sft", "trainer.beta=0.1")  # a key another option has
    assert "trainer.beta (a key of trainer=grpo, rloo only)" in elsewhere


def test_the_console_script_refuses_as_python_m_does(tmp_path):
    script, output = refused(tmp_path, "run", "trainer.lrr=1e-5", module=("ao_calib.cli",))
    module, _ = refused(tmp_path, "trainer.lrr=1e-5")
    assert "trainer.lr," in script and "+trainer.lrr" not in output
    assert script.replace("ao-calib run", "python -m ao_calib.run") == module


def test_a_misspelt_group_option_lists_the_options_a_user_can_pick(tmp_path):
    line, output = refused(tmp_path, "trainer=grop")
    assert line == "error: no trainer option 'grop'. Did you mean: grpo? Options: grpo, ppo, rloo, sft"
    assert "_schema" not in output


@pytest.mark.parametrize("shown", ["job", "all"])
def test_printing_the_config_refuses_a_value_as_the_run_does(tmp_path, shown):
    run, _ = refused(tmp_path, "trainer.lr=-1")
    printed, output = refused(tmp_path, "--cfg", shown, "trainer.lr=-1")
    assert printed == run == "error: trainer.lr=-1.0: out of range, allowed > 0"
    assert "trainer:" not in output  # no config printed


def test_a_sweep_with_a_misspelt_key_is_refused_before_its_directory_is_made(tmp_path):
    line, _ = refused(tmp_path, "-m", "trainer.lrr=1", "trainer.lr=1e-5,2e-5")
    assert line.startswith("error: unknown config key(s): trainer.lrr (did you mean trainer.lr,")


def test_a_reevaluation_names_the_closest_task_keys():
    cfg = compose_run_config(["experiment=function_call_tiny"])
    with pytest.raises(AOCalibError, match=r"task.data.tset_path: .* did you mean task.data.test_path"):
        apply_task_overrides(cfg, ["task.data.tset_path=x"])


def test_printing_the_config_of_a_run_the_checks_accept_prints_it():
    # logger=wandb beside a recipe that is optional and absent (function_call_tiny_qwen3_grpo): no recipe overrides it
    result = run_cli("ao_calib.run", "experiment=function_call_tiny", "logger=wandb", "--cfg", "job")
    assert_ok(result)
    assert yaml.safe_load(result.stdout)["logger"]["name"] == "wandb"


def test_help_hints_name_the_command_the_user_typed():
    script = run_cli("ao_calib.cli", "run", "--help", "no_such_key")
    module = run_cli("ao_calib.run", "--help", "no_such_key")
    assert script.returncode == module.returncode == 2
    assert "`ao-calib run --help` lists the groups" in script.stdout + script.stderr
    assert "`python -m ao_calib.run --help` lists the groups" in module.stdout + module.stderr
