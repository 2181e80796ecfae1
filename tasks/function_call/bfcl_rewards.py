"""Rewards and scores on BFCL cases (``task.data.format=bfcl``), from :mod:`.bfcl_checker`.

* ``bfcl_ast``: 1.0 when BFCL's AST check passes (the leaderboard's per-case score), else 0.0: the binary reward.
* ``bfcl_parseable``: format credit: the text decodes as calls (under the run's ``strict_format``) to functions
  the case lists; calls to listed functions, capped at the expected number, over max(expected, produced). A
  decodable ``[]`` or an empty answer earns nothing, and a repeated or extra call or an unlisted function less
  than the right number of calls (:func:`.rewards.format_credit`).
* ``bfcl_calls``: expected calls matched exactly / max(expected, produced): per-call partial credit.
* ``bfcl_params``: correct parameters over those either side names, best same-named pairing: per-parameter credit.
* ``bfcl_functions``: expected function names produced / max(expected, produced): credit for the right function
  before its arguments are right (a small model picks the function long before it copies the values).

No component pays for calling nothing where a call is expected: ``[]``, an empty answer and text without a call
earn 0.0 on every one. On an irrelevance case (empty ground truth: no function fits) it is the other way round, as
in BFCL: no call (``[]``, an empty answer, text that does not decode) earns 1.0 on every component, any call 0.0.

Rewards take the dataset columns ``bfcl_functions`` and ``bfcl_ground_truth`` (JSON text, see
:func:`.bfcl.training_row`), as TRL passes them by keyword.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable

from ao_calib.calibration import parse_epistemic_status
from ao_calib.rewards import completion_text
from .bfcl_checker import UndecodableError, call_credit, check, decode, function_credit, param_credit
from .rewards import format_credit

COMPONENTS = ("bfcl_ast", "bfcl_parseable", "bfcl_calls", "bfcl_params", "bfcl_functions")


@lru_cache(maxsize=4096)
def _case(functions_json: str, truth_json: str) -> tuple[list, list]:
    return json.loads(functions_json), json.loads(truth_json)


def score_case(text: str, functions: list[dict], ground_truth: list[dict], strict_format: bool = True
               ) -> dict[str, Any]:
    """Every component for one completion, and BFCL's error type (``""`` when valid). With an empty
    ``ground_truth`` (irrelevance) text that does not decode makes no call, which is right there."""
    try:
        calls = decode(text, strict_format)
    except UndecodableError:
        if not ground_truth:
            return {**dict.fromkeys(COMPONENTS, 1.0), "error_type": ""}
        return {**dict.fromkeys(COMPONENTS, 0.0), "error_type": "decoder_failed"}
    verdict = check(functions, calls, ground_truth)
    named = [next(iter(c)) for c in calls]
    return {"bfcl_ast": float(verdict.valid),
            "bfcl_parseable": format_credit(named, len(ground_truth), [f["name"] for f in functions]),
            "bfcl_calls": call_credit(functions, calls, ground_truth),
            "bfcl_params": param_credit(functions, calls, ground_truth),
            "bfcl_functions": function_credit(calls, ground_truth),
            "error_type": verdict.error_type}


def _answer_text(completion: Any) -> str:
    """The completion's text; a leading ``[epistemic status: NN]`` tag (calibrated runs) is set aside."""
    text = completion_text(completion)
    status = parse_epistemic_status(text)
    return status.answer if status.parsed else text


def make_rewards(strict_format: bool) -> dict[str, Callable[..., list[float]]]:
    """The reward functions, with TRL's signature, for a run's ``strict_format``."""

    @lru_cache(maxsize=8192)
    def scores(text: str, functions_json: str, truth_json: str) -> dict[str, Any]:
        # TRL calls each component on the same completions in turn: decode and check once
        return score_case(text, *_case(functions_json, truth_json), strict_format=strict_format)

    def component(key: str):
        def reward(completions, bfcl_functions, bfcl_ground_truth, **_: Any) -> list[float]:
            return [scores(_answer_text(c), f, t)[key]
                    for c, f, t in zip(completions, bfcl_functions, bfcl_ground_truth)]
        reward.__name__ = key
        return reward

    return {key: component(key) for key in COMPONENTS}
