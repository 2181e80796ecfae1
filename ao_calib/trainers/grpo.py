"""GRPO through TRL's GRPOTrainer: config mapping and a thin subclass that samples completions to disk."""

from __future__ import annotations

from trl import GRPOConfig

from ao_calib.core.errors import AOCalibError
from ao_calib.trainers.base import AOGRPOTrainer
from ao_calib.trainers.common import TrainerSetup, build_online_trainer, group_kwargs, sampling_kwargs, training_kwargs
from ao_calib.trainers.config import GRPOTrainerConfig
from ao_calib.trainers.steering import SteeringMixin


class SteeredGRPOTrainer(SteeringMixin, AOGRPOTrainer):
    """AOGRPOTrainer that injects each row's activations in every pass."""


def tool_kwargs(setup: TrainerSetup, stage: GRPOTrainerConfig) -> dict:
    """TRL's tool loop for a task that gives tools, or ``rollout_func`` for one whose rows have tools of their own
    and later user turns (``ao_calib.tools.rollouts``); refused where a part of the project's GRPO would not see the
    tool results' mask or would sample the later turns wrongly."""
    from ao_calib.tools import episodes_in_training, stage_clashes

    episodes = episodes_in_training(setup.data)
    if episodes is None:
        return {}
    if episodes == "tools":  # TRL's loop reads calls with the tokenizer's response parser; rows bring their own
        from ao_calib.tools.chat_format import check_transformers

        check_transformers("the task's tools")
    clashes = {"injected activations (a steered task)": setup.steering is not None,
               "a confidence credit other than sequence (task.calibration.credit)": any(
                   getattr(getattr(fn, "rule", None), "credit", "sequence") != "sequence"
                   for fn in setup.reward_funcs())}
    found = stage_clashes(stage) + [name for name, on in clashes.items() if on]
    if found:
        raise AOCalibError(f"the task gives tools (multi-turn rollouts), which do not combine with {', '.join(found)}")
    if episodes == "rows":
        from ao_calib.tools.rollouts import EpisodeRollout

        return {"rollout_func": EpisodeRollout(setup.data.row_tools)}
    return {"tools": list(setup.data.tools.functions)}


def build_grpo_config(setup: TrainerSetup, t: GRPOTrainerConfig, stage_name: str = "train") -> GRPOConfig:
    return GRPOConfig(
        **training_kwargs(setup, t, stage_name),
        **sampling_kwargs(setup, t),
        **group_kwargs(setup, t),
        loss_type=t.loss_type,
        scale_rewards=t.scale_rewards,
        max_tool_calling_iterations=setup.data.tools.max_rounds if setup.data and setup.data.tools else None,
    )


def build_grpo_trainer(setup: TrainerSetup, stage: GRPOTrainerConfig, stage_name: str,
                     callbacks: list) -> AOGRPOTrainer:
    args = build_grpo_config(setup, stage, stage_name)
    tools = tool_kwargs(setup, stage)
    if setup.steering is None:
        return build_online_trainer(AOGRPOTrainer, setup, stage, args, callbacks, shared_prefix=stage.shared_prefix,
                                    greedy_member=stage.greedy_member, **tools)
    return build_online_trainer(SteeredGRPOTrainer, setup, stage, args, callbacks, steering=setup.steering,
                                greedy_member=stage.greedy_member)
