"""What the GRPO overhead benchmarks share: one composed config, its task data and rewards, and builders for
ao_calib's trainer and a plain TRL GRPOTrainer over the same model, data, rewards and settings."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_dir
from trl import GRPOTrainer

from ao_calib import models
from ao_calib.rewards import build_reward_schedule
from ao_calib.task_api import get_task
from ao_calib.trainers import build_trainer
from ao_calib.trainers.grpo import build_grpo_config

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class GRPOBench:
    cfg: object
    task: object
    tokenizer: object
    base: object
    data: object
    reward_fns: dict
    schedule: object

    @classmethod
    def compose(cls, overrides: list[str]) -> GRPOBench:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        task = get_task(cfg)
        source = models.model_source(cfg.model, cfg.paths.cache_dir)
        tokenizer = models.load_tokenizer(source)
        base = models.load_base_model(cfg.model, source)
        bench = cls(cfg, task, tokenizer, base, None, {}, None)
        bench.data = task.build_data(tokenizer, bench.fresh_model())
        bench.reward_fns = task.reward_functions()
        bench.schedule = build_reward_schedule(cfg.reward, bench.reward_fns)
        return bench

    def fresh_model(self):
        """The base model with a new adapter: every timed round starts from the same weights."""
        return models.attach_lora(copy.deepcopy(self.base), self.cfg.model, self.cfg.trainer)

    def ao_calib_trainer(self, out: Path):
        return build_trainer(self.cfg, self.cfg.trainer, self.fresh_model(), self.tokenizer, self.data, self.schedule,
                             self.reward_fns, out, steering=self.task.steering())

    def plain_trl_trainer(self, out: Path):
        args = build_grpo_config(self.cfg, self.cfg.trainer, out / "checkpoints", self.schedule.weights_at(0))
        return GRPOTrainer(model=self.fresh_model(), reward_funcs=[self.reward_fns[n] for n in self.schedule.names],
                           args=args, train_dataset=self.data.train, processing_class=self.tokenizer)
