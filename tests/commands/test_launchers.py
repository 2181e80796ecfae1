"""Sweeps through hydra-submitit-launcher: the SLURM preset composes with its fields, a local two-job sweep (each job
two tasks, one run over two processes) runs as real submitit processes and is reported, and a job SLURM requeued
continues in its own directory. The accelerate configs are read by accelerate's own launcher."""

from __future__ import annotations

import json

import pytest

from tests.helpers.commands import run_cli
from tests.helpers.paths import CONF_DIR

# One final evaluation of two samples (one a process in a two-task job): what these tests need of a run is that it
# completes, resumes and is reported.
TINY = ["experiment=function_call_tiny", "eval.initial=false", "eval.num_samples=2"]


def test_the_slurm_launcher_composes_with_its_fields_overridable():
    result = run_cli("ao_calib.run", "hydra/launcher=slurm", "hydra.launcher.partition=gpu",
                     "hydra.launcher.nodes=2", "--cfg", "hydra")
    assert result.returncode == 0, result.stderr[-2000:]
    launcher = result.stdout.split("\n  launcher:\n", 1)[1]
    for field in ("submitit_launcher.SlurmLauncher", "nodes: 2", "gpus_per_node: 1", "tasks_per_node: 1",
                  "timeout_min: 240", "partition: gpu", "max_num_timeout: 3"):
        assert field in launcher, field


def test_a_local_submitit_sweep_runs_each_point_as_a_job_and_is_reported(tmp_path):
    """Each point a job of two tasks, as a two-GPU SLURM job would be: submitit starts both processes and the run
    derives torch.distributed's variables from the job (no torchrun inside the job)."""
    sweep = tmp_path / "sweep"
    result = run_cli("ao_calib.run", "-m", "hydra/launcher=submitit_local", "hydra.launcher.tasks_per_node=2", *TINY,
                     "trainer.max_steps=1",
                     "trainer.lr=1e-5,3e-5", f"hydra.sweep.dir={sweep}", env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    runs = sorted(p for p in sweep.iterdir() if (p / "summary.json").is_file())
    assert len(runs) == 2
    assert all(json.loads((r / "summary.json").read_text())["status"] == "completed" for r in runs)
    for run in runs:  # one run per job, trained by both of its tasks
        for log in (run / "run.log", run / "rank1.log"):
            assert "training on 2 process(es)" in log.read_text(), log
    jobs = [p for p in (sweep / ".submitit").iterdir() if p.name != "%j"]
    assert len(jobs) == 2  # two submitit jobs, each with its own folder of logs
    (sweep / "report.md").unlink()
    report = run_cli("ao_calib.report", str(sweep))
    assert report.returncode == 0, report.stderr[-2000:]
    text = (sweep / "report.md").read_text()
    assert "2 run(s): 2 completed" in text and "1e-05" in text and "3e-05" in text


def test_a_requeued_slurm_job_resumes_in_its_own_directory(tmp_path):
    out = tmp_path / "run"
    first = run_cli("ao_calib.run", *TINY, "trainer.max_steps=1", "trainer.save_steps=1", f"hydra.run.dir={out}")
    assert first.returncode == 0, first.stderr[-2000:]
    # The same job again, as SLURM restarts it after a preemption: the used directory is not refused.
    again = run_cli("ao_calib.run", *TINY, "trainer.max_steps=2", "trainer.save_steps=1", f"hydra.run.dir={out}",
                    env={"SLURM_RESTART_COUNT": "1"})
    assert again.returncode == 0, again.stderr[-2000:]
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
             if json.loads(line).get("stage") == "train" and "loss" in json.loads(line)]
    assert steps == sorted(set(steps)) and steps[-1] == 2  # step 1 kept, step 2 added, none twice
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"


@pytest.mark.parametrize("name", ["ddp", "fsdp2", "zero3"])
def test_the_accelerate_configs_are_what_accelerate_launch_reads(name):
    """``accelerate launch --config_file conf/accelerate/<name>.yaml -m ao_calib.run ...`` as accelerate's own
    launcher parses and validates it (a GPU machine runs it; here the strategy it selects is checked)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(
        ["--config_file", str(CONF_DIR / "accelerate" / f"{name}.yaml"), "-m", "ao_calib.run", "task=oracle"])
    args, _, _ = _validate_launch_command(args)
    assert args.num_processes >= 2 and args.mixed_precision == "bf16"
    if name == "ddp":
        assert args.multi_gpu and not args.use_fsdp and not args.use_deepspeed
    elif name == "fsdp2":
        env = prepare_multi_gpu_env(args)
        assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
        assert env["FSDP_AUTO_WRAP_POLICY"] == "TRANSFORMER_BASED_WRAP"
        assert env["FSDP_STATE_DICT_TYPE"] == "FULL_STATE_DICT"
    else:
        assert args.use_deepspeed and int(args.zero_stage) == 3 and str(args.zero3_init_flag).lower() == "false"


def test_the_slurm_fsdp2_preset_exports_what_accelerate_sets_for_our_fsdp2_config():
    """Under SLURM the tasks start without `accelerate launch`, so the preset sets accelerate's environment itself:
    the same values accelerate derives from conf/accelerate/fsdp2.yaml."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env
    from hydra import compose, initialize_config_dir

    from ao_calib.config.compose import register_schemas

    register_schemas()  # the schemas the config files build on
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=slurm_fsdp2"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher.tasks_per_node == launcher.gpus_per_node > 1
    exported = dict(line.removeprefix("export ").split("=", 1) for line in launcher.setup)
    args = launch_command_parser().parse_args(
        ["--config_file", str(CONF_DIR / "accelerate" / "fsdp2.yaml"), "-m", "ao_calib.run"])
    env = prepare_multi_gpu_env(_validate_launch_command(args)[0])
    assert exported == {k: env[k] for k in exported}
