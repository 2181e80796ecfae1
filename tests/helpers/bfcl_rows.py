"""Completions of the BFCL test fixture (tests/data/bfcl), as ``python -m ao_calib.score`` reads them."""

from __future__ import annotations

from ao_calib_tasks.function_call import bfcl
from tests.helpers.paths import PROJECT_ROOT

FIXTURE = PROJECT_ROOT / "tests" / "data" / "bfcl"


def completion_rows() -> list[dict]:
    """Rows of anyone's completions for every sixth BFCL fixture case: its reference call, bare and after prose."""
    rows = []
    for case in bfcl.load_cases(FIXTURE)[::6]:
        ref = bfcl.reference_call_text(case["ground_truth"])
        for completion in (ref, "Sure! " + ref):
            rows.append({"id": case["id"], "question": case["question"], "function": case["function"],
                         "possible_answer": case["ground_truth"], "completion": completion, "mine": 1})
    return rows


def write_multi_turn_folder(root, cases_by_category: dict[str, list[dict]]) -> None:
    """BFCL multi-turn cases (with their ``ground_truth``) written under ``root`` as ``bfcl_eval/data`` lays them out:
    ``BFCL_v4_<category>.json`` and ``possible_answer/`` beside it, one JSON object a line."""
    import json

    (root / "possible_answer").mkdir(parents=True, exist_ok=True)
    for category, cases in cases_by_category.items():
        name = f"BFCL_v4_{category}.json"
        (root / name).write_text("".join(json.dumps({k: v for k, v in c.items() if k != "ground_truth"}) + "\n"
                                         for c in cases))
        (root / "possible_answer" / name).write_text(
            "".join(json.dumps({"id": c["id"], "ground_truth": c["ground_truth"]}) + "\n" for c in cases))
