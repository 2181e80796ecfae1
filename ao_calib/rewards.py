"""Rewards as the trainers see them: the reward-function signature, the text of a completion as TRL hands it
over, and reward mixes (which functions the trainer computes and how they are weighted at each step)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ao_calib.core.errors import AOCalibError

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


class RewardFunctionError(AOCalibError):
    """A reward function raised: names the reward and the sample, instead of a bare traceback mid-training."""


COMPONENT_KEYS = {"_target_": None, "weight": 1.0, "kwargs": {}}
"""A user component's settings and their defaults: the function, its weight in a single mix (with ``phases``,
name the component in each phase's weights instead) and the keyword arguments passed to every call."""


def component_settings(name: str, component: Any) -> tuple[str, float, dict[str, Any]]:
    if not isinstance(component, dict):
        raise AOCalibError(f"reward.components.{name}: expected {{_target_: pkg.module.fn, weight: w, kwargs: {{}}}}")
    unknown = sorted(set(component) - set(COMPONENT_KEYS))
    if unknown:
        raise AOCalibError(f"reward.components.{name}.{unknown[0]}: unknown key (allowed: {', '.join(COMPONENT_KEYS)})")
    settings = {**COMPONENT_KEYS, **component}
    if not isinstance(settings["_target_"], str) or not settings["_target_"]:
        raise AOCalibError(f"reward.components.{name}._target_: required, the function as pkg.module.fn")
    if not isinstance(settings["weight"], (int, float)) or isinstance(settings["weight"], bool):
        raise AOCalibError(f"reward.components.{name}.weight: expected a number, got {settings['weight']!r}")
    if not isinstance(settings["kwargs"], dict):
        raise AOCalibError(f"reward.components.{name}.kwargs: expected a mapping, got {settings['kwargs']!r}")
    return settings["_target_"], float(settings["weight"]), settings["kwargs"]


def load_component(name: str, target: str, kwargs: dict[str, Any]) -> RewardFn:
    """The user's reward function ``target`` (``pkg.module.fn``), called with ``kwargs`` added to TRL's."""
    from hydra.utils import get_method

    try:
        fn = get_method(target)
    except Exception as exc:  # noqa: BLE001 -- ImportError, AttributeError or Hydra's wrapper of either
        cause = exc.__cause__ or exc
        raise AOCalibError(f"reward.components.{name}._target_={target}: cannot import it "
                           f"({type(cause).__name__}: {cause}). Is its package installed or on PYTHONPATH?") from None
    if not callable(fn):
        raise AOCalibError(f"reward.components.{name}._target_={target} is not a function")
    return functools.partial(fn, **kwargs) if kwargs else fn


def reported(name: str, fn: RewardFn) -> RewardFn:
    """``fn`` with its failures turned into a :class:`RewardFunctionError` naming the reward and the sample
    (the first one it fails on, found by scoring the batch's samples one at a time), and its output checked."""

    def reward(completions, **kwargs):
        try:
            scores = fn(completions=completions, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- any failure of user code is reported the same way
            raise RewardFunctionError(f"reward {name!r} raised {type(exc).__name__}: {exc}; "
                                      f"{_failing_sample(fn, completions, kwargs)}") from exc
        if scores is None or len(scores) != len(completions):
            raise RewardFunctionError(f"reward {name!r} returned {None if scores is None else len(scores)} scores "
                                      f"for {len(completions)} completions (one float or None per completion)")
        return scores

    reward.__name__ = name
    return reward


def _failing_sample(fn: RewardFn, completions: list, kwargs: dict) -> str:
    n = len(completions)
    for i in range(n):
        row = {k: (v[i] if isinstance(v, list) and len(v) == n else v) for k, v in kwargs.items()}
        one = {k: ([row[k]] if isinstance(kwargs[k], list) and len(kwargs[k]) == n else row[k]) for k in row}
        try:
            fn(completions=[completions[i]], **one)
        except Exception:  # noqa: BLE001
            shown = {k: v for k, v in row.items() if isinstance(v, (str, int, float)) and k != "trainer_state"}
            return (f"on sample {i} of the batch: completion {completion_text(completions[i])[:200]!r}, "
                    f"row {str(shown)[:400]}")
    return "on the batch as a whole (each sample alone scores)"


def build_reward_schedule(reward_cfg: DictConfig, available: dict[str, RewardFn]) -> RewardSchedule:
    """The mix's schedule. ``available`` (the task's reward functions, the dict the trainer reads them from) gains
    the mix's ``components`` from user code, each wrapped by :func:`reported`."""
    phases_cfg = OmegaConf.to_container(reward_cfg.phases, resolve=True)
    weights_cfg = OmegaConf.to_container(reward_cfg.weights, resolve=True)
    components = reward_cfg.get("components") or {}
    if isinstance(components, DictConfig):
        components = OmegaConf.to_container(components, resolve=True)
    if phases_cfg and weights_cfg:
        raise AOCalibError(f"reward={reward_cfg.name}: set either 'weights' or 'phases', not both")
    for name, component in components.items():
        if name in available:
            raise AOCalibError(f"reward.components.{name}: the task already has a reward of that name; rename it")
        target, weight, kwargs = component_settings(name, component)
        available[name] = reported(name, load_component(name, target, kwargs))
        if not phases_cfg:
            if name in weights_cfg:
                raise AOCalibError(f"reward.components.{name}: give its weight once, as components.{name}.weight")
            weights_cfg[name] = weight
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
