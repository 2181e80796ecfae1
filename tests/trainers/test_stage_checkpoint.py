"""A stage that had finished before a resume is loaded from its checkpoint, not trained
(``ao_calib.trainers.stage.load_checkpoint``, the one home of transformers' private ``Trainer._load_from_checkpoint``):
on the installed transformers, a real checkpoint of the tiny Qwen3's SFT stage puts its adapter weights into a
fresh trainer's model. And how each stage of a run starts, planned from where the run starts (``plan_stages``)."""

from __future__ import annotations

import datasets
import torch

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.runs.checkpoints import StartPoint
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import TaskData
from ao_calib.trainers import TrainerSetup, build_trainer
from ao_calib.trainers.config import SFTWarmupConfig
from ao_calib.trainers.stage import MAIN, StageStart, load_checkpoint, plan_stages


def lora_weights(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


def sft_trainer(cfg, run_dir: RunDir, seed: int):
    model_settings = typed(cfg.model, ModelConfig)
    torch.manual_seed(seed)  # each trainer's LoRA starts from its own random weights
    source = models.model_source(model_settings, cfg.paths.cache_dir)
    model = models.attach_lora(models.load_base_model(model_settings, source), model_settings)
    rows = datasets.Dataset.from_list([{"prompt": [{"role": "user", "content": f"question {i}"}],
                                        "completion": "yes"} for i in range(4)])
    setup = TrainerSetup(model_settings, model, models.load_tokenizer(source, model_settings), TaskData(rows, rows),
                         run_dir)
    stage = SFTWarmupConfig(max_steps=2, batch_size=2, save_steps=2, logging_steps=1, max_length=32)
    return build_trainer(setup, stage, "warmup"), model


def test_a_saved_checkpoint_loads_into_a_fresh_trainer_on_the_installed_transformers(tmp_path):
    cfg = compose_run_config(["model=tiny_qwen3", "task=function_call"])
    run_dir = RunDir(tmp_path)
    trainer, model = sft_trainer(cfg, run_dir, seed=0)
    trainer.train()
    trained = lora_weights(model)
    checkpoint = run_dir.checkpoints("warmup") / "checkpoint-2"
    assert checkpoint.is_dir()

    fresh_trainer, fresh = sft_trainer(cfg, RunDir(tmp_path / "fresh"), seed=1)
    before = lora_weights(fresh)
    assert any(not torch.equal(before[name], trained[name]) for name in trained)
    load_checkpoint(fresh_trainer, str(checkpoint))
    loaded = lora_weights(fresh)
    assert loaded.keys() == trained.keys() and all(torch.equal(loaded[name], trained[name]) for name in trained)


def test_each_stage_is_planned_from_where_the_run_starts():
    warmup, main = SFTWarmupConfig(max_steps=20), SFTWarmupConfig(max_steps=5)
    stages = [("warmup", warmup), (MAIN, main)]

    def starts(start: StartPoint):
        return [(plan.start, plan.checkpoint, plan.step) for plan in plan_stages(stages, start)]

    assert starts(StartPoint()) == [(StageStart.fresh, None, None)] * 2
    in_main = StartPoint(resuming=True, checkpoint="c/train/checkpoint-3", step=3, stage=MAIN)
    assert starts(in_main) == [(StageStart.skip, "c/train/checkpoint-3", None),
                               (StageStart.resume, "c/train/checkpoint-3", 3)]
    in_warmup = StartPoint(resuming=True, checkpoint="c/warmup/checkpoint-8", step=8, stage="warmup")
    assert starts(in_warmup) == [(StageStart.resume, "c/warmup/checkpoint-8", 8), (StageStart.fresh, None, None)]
    warmup_done = StartPoint(resuming=True, checkpoint="c/warmup/checkpoint-20", step=20, stage="warmup")
    assert starts(warmup_done) == [(StageStart.load, "c/warmup/checkpoint-20", 20), (StageStart.fresh, None, None)]
