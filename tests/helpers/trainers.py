"""The trainers a run builds, built in the test process from a composed config."""

from __future__ import annotations

from ao_calib.config.compose import compose_run_config
from ao_calib.models import loading as models
from ao_calib.rewards import build_reward_schedule
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import build_task, with_run_judge
from ao_calib.trainers import TrainerSetup, build_trainer

# Varying K per row (a random window) makes any row/vector mix-up land on non-placeholder tokens.
OVERRIDES = ["experiment=oracle_tiny", "task.activations.positions=window", "task.activations.window_min=1",
             "task.activations.window_max=6", "trainer.batch_size=4", "trainer.num_generations=2",
             "trainer.micro_batch_size=2", "trainer.num_iterations=2", "trainer.shuffle_dataset=true",
             "trainer.beta=0.1", "trainer.max_steps=3", "trainer.save_steps=1000"]


def build_setup(tmp_path, overrides) -> tuple[TrainerSetup, object]:
    """What a run builds its trainers from, for these overrides, writing into ``tmp_path``; and the config."""
    cfg = compose_run_config(list(overrides))
    task = build_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora)
    data = with_run_judge(task, task.build_data(tokenizer, model), model, tokenizer)
    reward_fns = task.reward_functions(data)
    schedule = build_reward_schedule(cfg.reward, reward_fns)
    return TrainerSetup(cfg.model, model, tokenizer, data, RunDir(tmp_path), schedule, reward_fns,
                        seed=cfg.trainer.seed), cfg


def build(tmp_path, overrides=(), base=OVERRIDES):
    setup, cfg = build_setup(tmp_path, [*base, *overrides])
    return build_trainer(setup, cfg.trainer), setup.steering
