"""Rewards as the trainers see them: the reward-function signature, the text of a completion as TRL hands it
over, and reward mixes (which functions the trainer computes and how they are weighted at each step)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ao_calib.errors import AOCalibError

# TRL's reward-function signature: (prompts, completions, **dataset columns) -> one score per completion, None
# where the sample is masked (e.g. a failed judgment).
RewardFn = Callable[..., list[float | None]]


@dataclass(frozen=True)
class RewardPhase:
    until_step: int | None  # the phase holds while global_step < until_step; None: to the end
    weights: tuple[float, ...]


@dataclass(frozen=True)
class RewardSchedule:
    """The reward functions the trainer computes (all phases' union, so each is logged throughout) and their
    weight vector per curriculum phase. A single mix is a schedule with one open-ended phase."""

    names: tuple[str, ...]
    phases: tuple[RewardPhase, ...]

    def weights_at(self, step: int) -> tuple[float, ...]:
        for phase in self.phases:
            if phase.until_step is None or step < phase.until_step:
                return phase.weights
        return self.phases[-1].weights

    def phase_index(self, step: int) -> int:
        return self.phases.index(next(p for p in self.phases if p.until_step is None or step < p.until_step))


def build_reward_schedule(reward_cfg: DictConfig, available: dict[str, RewardFn]) -> RewardSchedule:
    phases_cfg = OmegaConf.to_container(reward_cfg.phases, resolve=True)
    weights_cfg = OmegaConf.to_container(reward_cfg.weights, resolve=True)
    if phases_cfg and weights_cfg:
        raise AOCalibError(f"reward={reward_cfg.name}: set either 'weights' or 'phases', not both")
    if not phases_cfg:
        phases_cfg = [{"until_step": None, "weights": weights_cfg}]
    names: list[str] = []
    for i, phase in enumerate(phases_cfg):
        if not phase["weights"]:
            raise AOCalibError(f"reward={reward_cfg.name}: phase {i} has no weights")
        for name in phase["weights"]:
            if name not in available:
                raise AOCalibError(
                    f"reward={reward_cfg.name}: unknown reward function {name!r}; "
                    f"this task offers {', '.join(sorted(available))}"
                )
            if name not in names:
                names.append(name)
    bounds = [p["until_step"] for p in phases_cfg]
    if any(b is None for b in bounds[:-1]) or any(
        a >= b for a, b in zip(bounds[:-1], bounds[1:]) if a is not None and b is not None
    ):
        raise AOCalibError(
            f"reward={reward_cfg.name}: phases need increasing until_step values, null only on the last"
        )
    phases = tuple(
        RewardPhase(p["until_step"], tuple(float(p["weights"].get(n, 0.0)) for n in names)) for p in phases_cfg
    )
    return RewardSchedule(tuple(names), phases)


def completion_text(completion: Any) -> str:
    """Return the text of a completion given as a string or a chat-message list.

    TRL passes plain strings for standard datasets and lists of messages
    (``[{"role": "assistant", "content": "..."}]``) for conversational ones.
    Assistant messages are joined with newlines (all messages when none has an
    assistant role); content given as a list of parts keeps its text parts.
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in messages if m.get("role") == "assistant"]
        chosen = assistant or messages
        return "\n".join(_content_text(m.get("content")) for m in chosen)
    return str(completion)


def _content_text(content: Any) -> str:
    """Text of a message's content: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)
