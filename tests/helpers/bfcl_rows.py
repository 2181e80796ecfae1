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
