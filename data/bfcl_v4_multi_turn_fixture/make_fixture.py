"""Regenerate this fixture of recorded BFCL v4 multi-turn trajectories from the installed ``bfcl-eval`` wheel.

    pip install --no-deps bfcl-eval==2026.3.23
    python data/bfcl_v4_multi_turn_fixture/make_fixture.py

Per category, ``random.Random(SEED).sample`` of N case ids; per case, its ground truth as a model would write it
(each call a step, positional arguments named from the method's signature: BFCL's decoder keeps keyword arguments
only) and four perturbations of it, each drawn with the same generator: a call dropped, a turn left empty, an
argument changed, a call repeated. Each line: ``id``, ``kind``, ``turns`` (per user turn, the steps, each a list of
call strings). Deterministic; these are BFCL's cases: evaluation only, never training.
"""

from __future__ import annotations

import ast
import copy
import json
import random
from pathlib import Path

from ao_calib_tasks.function_call.bfcl_multi_turn import (
    CATEGORIES,
    Environment,
    call_string,
    load_cases,
)
from ao_calib_tasks.function_call.parsing import parse_calls

SEED = 0
N = 13  # cases per category: 52 cases, 260 trajectories
OUT = Path(__file__).resolve().parent / "trajectories.jsonl"


def keyword_call(text: str, environment: Environment) -> str:
    """A ground-truth call with its positional arguments named, as a model's call must be written."""
    [call] = parse_calls(text)
    return call_string(environment.named(call))


def changed(text: str) -> str:
    """The call with its first argument's value changed (a string extended, a number moved, a flag flipped)."""
    node = ast.parse(text, mode="eval").body
    if not node.keywords:
        return text
    value = ast.literal_eval(node.keywords[0].value)
    new = (value + "_x" if isinstance(value, str) else not value if isinstance(value, bool)
           else value + 1 if isinstance(value, (int, float)) else value[:-1] if isinstance(value, list) else None)
    node.keywords[0].value = ast.parse(repr(new), mode="eval").body
    return ast.unparse(node)


def trajectories(case: dict, rng: random.Random) -> list[tuple[str, list]]:
    environment = Environment(case)
    truth = [[[keyword_call(c, environment)] for c in turn] for turn in case["ground_truth"]]
    called = [(t, s) for t, turn in enumerate(truth) for s in range(len(turn))]
    out = [("ground_truth", truth)]
    if not called:
        return out
    t, s = rng.choice(called)
    dropped = copy.deepcopy(truth)
    del dropped[t][s]
    empty = copy.deepcopy(truth)
    empty[t] = []
    argument = copy.deepcopy(truth)
    argument[t][s] = [changed(argument[t][s][0])]
    repeated = copy.deepcopy(truth)
    repeated[t].insert(s + 1, list(repeated[t][s]))
    return out + [("drop_call", dropped), ("empty_turn", empty), ("changed_argument", argument),
                  ("repeated_call", repeated)]


def main() -> None:
    rng = random.Random(SEED)
    lines = []
    for category in CATEGORIES:
        cases = load_cases(category)
        for case in sorted(rng.sample(cases, N), key=lambda c: int(c["id"].rsplit("_", 1)[1])):
            lines += [json.dumps({"id": case["id"], "kind": kind, "turns": turns})
                      for kind, turns in trajectories(case, rng)]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} trajectories to {OUT}")


if __name__ == "__main__":
    main()
