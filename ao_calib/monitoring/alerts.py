"""What an alert is: a named condition on one logged step (the trainers' callback, ``ao_calib.monitoring.callback``,
fires it after it held ``patience`` steps in a row). Its own module so that the components that define alerts
(trainers, calibration) need not import each other."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class Alert:
    """``check(logs)`` returns ``(value, threshold)`` when the condition holds on one logged step, else None."""

    name: str
    message: str  # formatted with value and threshold
    check: Callable[[dict], "tuple[float, float] | None"]


def below(key: str, threshold: float) -> Callable[[dict], tuple[float, float] | None]:
    return lambda logs: (logs[key], threshold) if logs.get(key) is not None and logs[key] < threshold else None


def below_any(keys: Sequence[str], threshold: float) -> Callable[[dict], tuple[float, float] | None]:
    """Holds when any of ``keys`` is logged below ``threshold`` (GRPO and RLOO log the group advantage spread, PPO
    the spread of its rollouts' scores)."""
    def check(logs: dict):
        found = [logs[k] for k in keys if logs.get(k) is not None and logs[k] < threshold]
        return (min(found), threshold) if found else None

    return check


def above(key: str, threshold: float) -> Callable[[dict], tuple[float, float] | None]:
    return lambda logs: (logs[key], threshold) if logs.get(key) is not None and logs[key] > threshold else None
