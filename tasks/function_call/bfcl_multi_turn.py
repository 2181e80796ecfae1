"""BFCL v4's multi-turn categories, read from the ``bfcl-eval`` wheel (installed ``--no-deps``): its cases, its
stateful API classes and its checker.

``Environment`` is one case's instances (loaded from its ``initial_config`` as BFCL loads them) running the model's
calls *parsed* by the project's AST parser (``parsing.Call``: a name and literal arguments) through ``getattr``,
never ``eval``: the results and errors are BFCL's, byte for byte (BFCL formats them the same way). ``episode_verdict``
is BFCL's per-turn verdict (state check, then response check) from its own pure checkers on two environments run
side by side; ``bfcl_verdict`` runs BFCL's whole ``multi_turn_checker`` on a case, for scoring and for checking that
the two agree. These cases are for evaluation only."""

from __future__ import annotations

import copy
import importlib
import inspect
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ao_calib.core.errors import AOCalibError

from .parsing import Call

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"
_SOURCE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# BFCL's class -> module map and stateless classes (constants/executable_backend_config.py, 2026.3.23)
_CLASS_MODULE = {"GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
                 "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
                 "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control"}
_STATELESS = {"MathAPI"}
_BLOCKED = {"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"}  # BFCL refuses these names
_checks = itertools.count()


def bfcl_data() -> Path:
    """The wheel's data folder, or an error saying how to install it."""
    try:
        package = importlib.import_module("bfcl_eval")
    except ImportError:
        raise AOCalibError(f"BFCL's multi-turn cases, classes and checker come from the bfcl-eval wheel: {INSTALL}"
                           ) from None
    return Path(package.__file__).parent / "data"


def load_cases(category: str) -> list[dict]:
    """A multi-turn category's cases, each with its ``ground_truth`` (call strings per turn)."""
    if category not in CATEGORIES:
        raise AOCalibError(f"unknown BFCL multi-turn category {category!r}; the categories: {', '.join(CATEGORIES)}")
    data = bfcl_data()
    questions = [json.loads(line) for line in (data / f"BFCL_v4_{category}.json").read_text().splitlines() if line]
    answers = [json.loads(line) for line in (data / "possible_answer" / f"BFCL_v4_{category}.json")
               .read_text().splitlines() if line]
    truth = {a["id"]: a["ground_truth"] for a in answers}
    return [{**q, "ground_truth": truth[q["id"]]} for q in questions]


def format_result(result: Any) -> str:
    """A call's result as BFCL writes it into the conversation and compares it."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # noqa: BLE001 -- BFCL falls back to str on any failure
            return str(result)
    return str(result)


@dataclass
class Environment:
    """One case's API instances, as BFCL loads them, and the calls made on them."""

    case: dict
    instances: dict[str, Any] = field(default_factory=dict)
    methods: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        long_context = "long_context" in self.case["id"] or "composite" in self.case["id"]
        for name in self.case["involved_classes"]:
            cls = getattr(importlib.import_module(f"{_SOURCE}.{_CLASS_MODULE[name]}"), name)
            instance = cls()
            if name not in _STATELESS:
                instance._load_scenario(copy.deepcopy(self.case["initial_config"].get(name, {})),
                                        long_context=long_context)
            self.instances[name] = instance
            self.methods.update({m: fn for m, fn in inspect.getmembers(instance, inspect.ismethod)
                                 if not m.startswith("_")})

    def call(self, call: Call, positional: bool = False) -> str:
        """One parsed call's result. The model's calls pass keyword arguments only, as BFCL's decoder keeps only
        those (``positional``: the ground truth's calls, which BFCL runs as written)."""
        args = [v for k, v in call.args if k.isdigit()] if positional else []
        kwargs = {k: v for k, v in call.args if not k.isdigit()}
        if call.name.split(".")[-1] in _BLOCKED:
            return f"Error during execution: Function call {call.name.split('.')[-1]} is not allowed."
        try:
            method = self.methods.get(call.name)
            if method is None:
                raise NameError(f"name '{call.name}' is not defined")  # what BFCL's eval raises
            return format_result(method(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 -- any failure is the call's result, as in BFCL
            return f"Error during execution: {exc}"


def episode_verdict(case: dict, turns: Sequence[Sequence[Sequence[Call]]]) -> dict:
    """BFCL's verdict on a whole episode, from BFCL's own pure state and response checks on two environments run
    side by side (the model's calls, the ground truth's): the per-turn reward of a rollout. ``turns`` as for
    ``bfcl_verdict``; ``{"valid": True}``, or the first failing turn with BFCL's failure type."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        response_checker,
        state_checker,
    )

    from .parsing import parse_calls

    if len(turns) != len(case["ground_truth"]):
        return {"valid": False, "error_type": "multi_turn:force_terminated"}
    model, truth = Environment(case), Environment(case)
    so_far: list[str] = []
    for index, (steps, expected) in enumerate(zip(turns, case["ground_truth"], strict=True)):
        steps = [step for step in steps if step]
        so_far += [model.call(c) for step in steps for c in step]
        truth_results = [truth.call(c, positional=True) for text in expected for c in parse_calls(text)]
        if not expected:
            continue
        if not steps:
            return {"valid": False, "error_type": "multi_turn:empty_turn_model_response", "turn": index}
        if not state_checker(model.instances, truth.instances)["valid"]:
            return {"valid": False, "error_type": "multi_turn:instance_state_mismatch", "turn": index}
        if not response_checker(so_far, truth_results, index)["valid"]:
            return {"valid": False, "error_type": "multi_turn:execution_response_mismatch", "turn": index}
    return {"valid": True}


def call_string(call: Call) -> str:
    """A model's call as BFCL's decoder would hand it to the checker: keyword arguments only, literals by repr."""
    return f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.args if not k.isdigit())})"


def bfcl_verdict(case: dict, turns: Sequence[Sequence[Sequence[str]]]) -> dict:
    """BFCL's own ``multi_turn_checker`` on a case: ``turns`` holds, per user turn, the model's steps, each a list
    of call strings as BFCL's decoder writes them (``call_string``); empty steps are dropped, as BFCL's runner drops
    them. Each check runs under a name of its own and clears BFCL's cached instances after."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        multi_turn_checker,
    )

    model_result = [[list(step) for step in turn if step] for turn in turns]
    name = f"ao_calib_check_{next(_checks)}"
    try:
        if len(model_result) != len(case["ground_truth"]):
            return {"valid": False, "error_type": "multi_turn:force_terminated"}
        return multi_turn_checker(model_result, case["ground_truth"], case, case["id"].rsplit("_", 1)[0], name)
    finally:
        cached = vars(multi_turn_utils)
        for key in [k for k in cached if k.startswith(name)]:
            del cached[key]
