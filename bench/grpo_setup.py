"""What the GRPO overhead benchmarks share: one composed config, its task data and rewards, and builders for
ao_calib's trainer and a plain TRL GRPOTrainer over the same model, data, rewards and settings."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
from trl import GRPOTrainer

from ao_calib.config.compose import compose_run_config
from ao_calib.models import loading as models
from ao_calib.models.config import TinyModelConfig
from ao_calib.models.tiny.builder import build_random_model
from ao_calib.rewards import build_reward_schedule
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import build_task, with_run_judge
from ao_calib.trainers import TrainerSetup, build_trainer
from ao_calib.trainers.grpo import build_grpo_config
from bench.report import alternating_medians

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
    def compose(cls, overrides: list[str], shape: TinyModelConfig | None = None) -> GRPOBench:
        """The config from ``overrides``; its model is loaded as a run would load it, or, with ``shape``, built
        in memory with random weights in that shape (``model.dtype`` on a GPU, float32 on CPU)."""
        cfg = compose_run_config(overrides)
        task = build_task(cfg)
        if shape is None:
            source = models.model_source(cfg.model, cfg.paths.cache_dir)
            tokenizer = models.load_tokenizer(source, cfg.model)
            base = models.load_base_model(cfg.model, source)
        else:
            on_gpu = torch.cuda.is_available()
            dtype = models.torch_dtype(cfg.model.dtype) if on_gpu else torch.float32
            base, tokenizer = build_random_model(shape, dtype=dtype, device="cuda" if on_gpu else "cpu",
                                                 attn_implementation=cfg.model.attn_implementation)
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
        bench = cls(cfg, task, tokenizer, base, None, {}, None)
        # extraction runs without the adapter anyway
        bench.data = with_run_judge(task, task.build_data(tokenizer, base), base, tokenizer)
        bench.reward_fns = task.reward_functions(bench.data)
        bench.schedule = build_reward_schedule(cfg.reward, bench.reward_fns)
        return bench

    def fresh_model(self, copy_base: bool = True):
        """The base model with a new adapter: every timed round starts from the same weights. Without
        ``copy_base`` the adapter goes onto the base itself (one trainer only, but no second copy in memory)."""
        base = copy.deepcopy(self.base) if copy_base else self.base
        return models.attach_lora(base, self.cfg.model, self.cfg.trainer.lora)

    def setup(self, out: Path, copy_base: bool = True) -> TrainerSetup:
        return TrainerSetup(self.cfg.model, self.fresh_model(copy_base), self.tokenizer, self.data, RunDir(out),
                            self.schedule, self.reward_fns, seed=self.cfg.trainer.seed)

    def ao_calib_trainer(self, out: Path, copy_base: bool = True):
        return build_trainer(self.setup(out, copy_base), self.cfg.trainer)

    def plain_trl_trainer(self, out: Path):
        args = build_grpo_config(self.setup(out), self.cfg.trainer)
        return GRPOTrainer(model=self.fresh_model(), reward_funcs=[self.reward_fns[n] for n in self.schedule.names],
                           args=args, train_dataset=self.data.train, processing_class=self.tokenizer)

    def time_against_trl(self, rounds: int, steps: int, name: str = "ao_calib") -> tuple[float, float, float]:
        """Median ms per step of ao_calib's trainer (``name``) and of the plain TRL one, from alternating rounds
        (``alternating_medians``), and their ratio; the medians are printed too."""
        medians = alternating_medians({name: self.ao_calib_trainer, "trl": self.plain_trl_trainer}, rounds, steps)
        ours_ms, trl_ms = medians[name] * 1000, medians["trl"] * 1000
        print(f"median: {name} {ours_ms:.1f} ms/step, plain TRL {trl_ms:.1f} ms/step, ratio {ours_ms / trl_ms:.3f}")
        return ours_ms, trl_ms, ours_ms / trl_ms
