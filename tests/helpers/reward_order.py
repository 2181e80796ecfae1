"""What the reward-order tests (one per tool-calling task) build their cases from: every weighting of the task's
rewards a shipped reward config (conf/reward/) trains on, and those mixes' scores beside the components'."""

from __future__ import annotations

from omegaconf import OmegaConf

from tests.helpers.paths import CONF_DIR

REWARD_DIR = CONF_DIR / "reward"


def shipped_mixes(components: set[str]) -> dict[str, dict[str, float]]:
    """Every weighting a run can train on made of ``components`` only: each mix file's weights, and each curriculum
    phase's, named ``<file>[<i>]``."""
    mixes = {}
    for path in sorted(REWARD_DIR.glob("*.yaml")):
        cfg = OmegaConf.load(path)
        weightings = [cfg.get("weights") or {}] + [p.weights for p in cfg.get("phases") or []]
        for i, weights in enumerate(weightings):
            weights = dict(weights)
            if weights and set(weights) <= components:
                mixes[f"{path.stem}[{i}]"] = weights
    return mixes


def mixed(scores: dict[str, list[float]], weights: dict[str, float]) -> list[float]:
    return [sum(w * scores[k][i] for k, w in weights.items()) for i in range(len(next(iter(scores.values()))))]


def with_mixes(scores: dict[str, list[float]], components: set[str]) -> dict[str, list[float]]:
    """Each component's scores, and each shipped mix's (``mix <name>``) among those the scores can weigh."""
    return {**scores, **{f"mix {name}": mixed(scores, w) for name, w in shipped_mixes(components).items()
                         if set(w) <= set(scores)}}
