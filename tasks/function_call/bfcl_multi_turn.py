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
import functools
import importlib
import inspect
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ao_calib.core.errors import AOCalibError
from ao_calib.tools.episodes import LATER_TURNS

from .parsing import Call, parse_calls

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
    """A multi-turn category's cases from the installed wheel, each with its ``ground_truth`` (call strings per
    turn)."""
    if category not in CATEGORIES:
        raise AOCalibError(f"unknown BFCL multi-turn category {category!r}; the categories: {', '.join(CATEGORIES)}")
    return load_file(bfcl_data() / f"BFCL_v4_{category}.json")


def load_file(path: Path) -> list[dict]:
    """One multi-turn question file's cases with their ground truth (``possible_answer/`` beside it)."""
    from ao_calib.core.errors import MissingDataFileError

    answers_path = path.parent / "possible_answer" / path.name
    if not answers_path.is_file():
        raise MissingDataFileError(f"BFCL multi-turn: no possible_answer file for {path} (looked for {answers_path})")
    truth = {a["id"]: a["ground_truth"] for a in _json_lines(answers_path)}
    cases = _json_lines(path)
    missing = [c["id"] for c in cases if c["id"] not in truth]
    if missing:
        raise AOCalibError(f"BFCL multi-turn: {answers_path} has no ground truth for {len(missing)} cases of {path} "
                           f"(first: {missing[0]})")
    return [{**case, "ground_truth": truth[case["id"]]} for case in cases]


def load_files(files: Sequence[Path]) -> list[dict]:
    """The cases of several multi-turn question files (``load_file``), in order."""
    return [case for file in files for case in load_file(file)]


def multi_turn_files(path: str | Path) -> list[Path]:
    """The multi-turn question files a held-out path names: the file itself, or those of a folder laid out as BFCL's
    ``bfcl_eval/data``; none where the path holds single-turn categories (they are read as today, and win)."""
    from .bfcl import SUPPORTED_CATEGORIES, file_category

    path = Path(path)
    files = sorted(path.glob("*.json*")) if path.is_dir() else [path]
    multi = [f for f in files if file_category(f) in CATEGORIES]
    single = [f for f in files if file_category(f) in SUPPORTED_CATEGORIES]
    return [] if single else multi


def _json_lines(path: Path) -> list[dict]:
    """BFCL's data files: one JSON object a line, whatever their ``.json`` name says."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]


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

    def named(self, call: Call) -> Call:
        """``call`` with its positional arguments named from its method's signature, as a model must write them
        (BFCL's decoder keeps keyword arguments only); the ground truth writes some positionally."""
        names = list(inspect.signature(self.methods[call.name]).parameters)
        return Call(call.name, tuple((names[int(k)] if k.isdigit() else k, v) for k, v in call.args))

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


# ------------------------------------------------------------------------------------------ episodes of a case

MULTI_TURN_PROMPT = (
    "\n\nAt each turn, complete the user's request within the turn: keep writing function calls until it is done; "
    "a reply without a call ends the turn, and the next request follows.")
"""BFCL's multi-turn addition to its prompting system prompt, in substance, in this project's words."""
ADDITIONAL_FUNCTIONS = "{functions}\nI have updated some more functions you can choose from. What about now?"
"""The user turn BFCL writes where a ``miss_func`` case gives the functions it held back (BFCL's own words)."""


@functools.cache
def _class_docs(name: str) -> tuple[dict, ...]:
    """A class's function docs, read once (one file a class in the wheel, named as the class's module)."""
    return tuple(_json_lines(bfcl_data() / "multi_turn_func_doc" / f"{_CLASS_MODULE[name]}.json"))


def function_docs(case: dict) -> tuple[list[dict], dict[int, list[dict]]]:
    """(the docs the system prompt lists, the docs held back until a turn): the involved classes' function docs,
    less those ``missed_function`` gives at a later turn (BFCL's ``populate_test_cases_with_predefined_functions``)."""
    docs = [doc for name in case["involved_classes"] for doc in _class_docs(name)]
    held = {int(turn): [d for d in docs if d["name"] in names]
            for turn, names in (case.get("missed_function") or {}).items()}
    withheld = {d["name"] for turn_docs in held.values() for d in turn_docs}
    return [d for d in docs if d["name"] not in withheld], held


def case_row(case: dict, docs: str = "indented") -> dict:
    """An evaluation row of a case: the system turn with its function docs and the first user turn as the prompt,
    the later user turns (a held-back function's docs where BFCL gives them) as ``later_turns``."""
    from .bfcl import system_prompt

    listed, held = function_docs(case)
    turns = [list(turn) or [{"role": "user", "content": ADDITIONAL_FUNCTIONS.format(
        functions=json.dumps(held.get(index, [])))}] for index, turn in enumerate(case["question"])]
    return {"id": case["id"], "case": case,
            "prompt": [{"role": "system", "content": system_prompt(listed, docs) + MULTI_TURN_PROMPT}, *turns[0]],
            LATER_TURNS: turns[1:]}


def evaluation_row(case: dict, docs: str = "indented", kind: str | None = None) -> dict:
    """A held-out row of a case (``case_row``) as a dataset holds it: the case and its ground truth as JSON text;
    ``kind``: its category (by default BFCL's, from its id)."""
    row = case_row(case, docs)
    return {**{k: v for k, v in row.items() if k != "case"}, "kind": kind or case["id"].rsplit("_", 1)[0],
            "bfcl_case": json.dumps(case), "bfcl_ground_truth": json.dumps(case["ground_truth"])}


def row_tools(row: dict, max_steps: int = 20) -> Any:
    """A row's tools: a fresh environment of its case (``case_tools``)."""
    return case_tools(json.loads(row["bfcl_case"]), max_steps)


def turns_passed(case: dict, turns: Sequence[Sequence[Sequence[Call]]]) -> int:
    """How many of the case's user turns pass BFCL's state and response checks before the first that fails
    (``episode_verdict``; none when the episode has another number of turns)."""
    checked = episode_verdict(case, turns)
    return len(case["ground_truth"]) if checked["valid"] else checked.get("turn", 0)


# BFCL's failure types an episode is counted under (``fail_<type>``); any other is ``fail_other``
FAILURES = ("instance_state_mismatch", "execution_response_mismatch", "empty_turn_model_response", "force_terminated")


# how a failed call's result starts: BFCL's words (``Environment.call``), or the episode loop's for a tool the case
# does not have (``ao_calib.tools.episodes.tool_result``, TRL's)
ERROR_RESULTS = ("Error during execution", "{'error': ")
_CALL_START = re.compile(r"\s*\[?\s*[A-Za-z_][\w.]*\s*\(")


def score_episode(episode: Sequence[dict], row: dict) -> dict[str, float]:
    """A played episode of a case: BFCL's verdict (``bfcl_ast``, the task's headline; ``bfcl_verdict``), the share
    of its user turns passed before the first failing one (``turns_passed``; ``episode_verdict``), the calls it made,
    its failure type as a one-hot ``fail_*``, and what went wrong on the way: ``tool_errors`` (calls whose result is
    an error: an unknown function, wrong arguments, an exception inside a method) and ``malformed_calls`` (messages
    that start like a call and parse as none, ending their turn)."""
    case = json.loads(row["bfcl_case"])
    turns = episode_steps(episode)
    verdict = bfcl_verdict(case, [[[call_string(c) for c in step] for step in turn] for turn in turns])
    failure = str(verdict.get("error_type", "")).removeprefix("multi_turn:")
    kind = failure if failure in FAILURES else "other"
    said = [m for m in episode if m.get("role") == "assistant"]
    return {"bfcl_ast": float(verdict["valid"]), "turns_passed": turns_passed(case, turns) / len(case["ground_truth"]),
            "calls": float(sum(len(step) for turn in turns for step in turn)),
            "tool_errors": float(sum(m.get("role") == "tool" and str(m.get("content", "")).startswith(ERROR_RESULTS)
                                     for m in episode)),
            "malformed_calls": float(sum(not m.get("tool_calls") and bool(_CALL_START.match(m.get("content") or ""))
                                         for m in said)),
            **{f"fail_{name}": float(not verdict["valid"] and kind == name) for name in (*FAILURES, "other")}}


END_OF_TURN = "Done."  # what a trajectory's model says when a turn's calls are done (any text without a call ends it)


def trajectory(case: dict) -> list[dict]:
    """The episode after a case's prompt that its ground truth is, as an SFT warm-up imitates it: per user turn,
    one message with the turn's calls (keyword arguments, as the model must write them), their results, and a
    message without a call; then the next user turn."""
    environment = Environment(case)
    rows = case_row(case)
    episode: list[dict] = []
    for index, calls in enumerate(case["ground_truth"]):
        if index:
            episode += rows[LATER_TURNS][index - 1]
        parsed = [environment.named(c) for text in calls for c in parse_calls(text)]
        if parsed:
            episode.append({"role": "assistant", "content": "[" + ", ".join(map(call_string, parsed)) + "]"})
            episode += [{"role": "tool", "name": c.name, "content": environment.call(c)} for c in parsed]
        episode.append({"role": "assistant", "content": END_OF_TURN})
    return episode


FORMAT_CREDIT = 0.1  # per-turn reward: the most a well-formed but wrong episode earns


def turn_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL's reward signature, for episodes of multi-turn cases (the rows' ``bfcl_case``): the share of the case's
    user turns that pass BFCL's state and response checks before the first that fails (``episode_verdict``), plus
    ``FORMAT_CREDIT`` times the share of the turns that need calls in which the model wrote parseable ones (nothing
    for an empty turn where calls were needed). The episodes are GRPO's rollouts' ``episode`` (their messages,
    ``ao_calib.tools.rollouts``) where given, else the completions."""
    rewards = []
    for episode, case_json in zip(kwargs.get("episode") or completions, kwargs["bfcl_case"], strict=True):
        case = json.loads(case_json)
        turns = episode_steps(episode) if isinstance(episode, list) else [[]]
        needed = [i for i, calls in enumerate(case["ground_truth"]) if calls]
        formed = sum(1 for i in needed if i < len(turns) and any(turns[i]))
        rewards.append(turns_passed(case, turns) / len(case["ground_truth"])
                       + FORMAT_CREDIT * formed / max(len(needed), 1))
    return rewards


def case_tools(case: dict, max_steps: int = 20) -> Any:
    """A fresh environment's methods as the episode's tools (``ao_calib.tools.Tools``): a call runs on the case's
    instances (``Environment.call``), at most ``max_steps`` messages with calls per user turn (BFCL's limit)."""
    from ao_calib.tools import Tools

    environment = Environment(case)

    def tool(name: str):
        def run(**arguments) -> str:
            return environment.call(Call(name, tuple(arguments.items())))

        run.__name__ = name
        return run

    return Tools(tuple(tool(name) for name in environment.methods), max_steps, parse=parsed_calls_turn)


def parsed_calls_turn(tokenizer, prompt_text: str, text: str) -> dict:
    """The model's message, its calls read by the project's AST parser (BFCL's ``[f(a=1), g(b=2)]`` form)."""
    calls = [{"type": "function", "function": {"name": c.name, "arguments": dict(c.args)}} for c in parse_calls(text)]
    return {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}


def episode_steps(episode: Sequence[dict]) -> list[list[list[Call]]]:
    """An evaluated episode as BFCL's checker reads it: per user turn, the steps (each message's calls)."""
    turns: list[list[list[Call]]] = [[]]
    for message in episode:
        if message["role"] == "user":
            turns.append([])
        elif message["role"] == "assistant" and message.get("tool_calls"):
            turns[-1].append([Call(c["function"]["name"], tuple(c["function"]["arguments"].items()))
                              for c in message["tool_calls"]])
    return turns
