"""Agreement of our BFCL checker (``ao_calib_tasks.function_call.bfcl_checker``) with BFCL's own AST checker.

BFCL's checker ships in the ``bfcl-eval`` wheel, whose dependencies (pinned numpy, vLLM extras, several vendor
SDKs, faiss, sentence-transformers) are too heavy for this project. This script loads just its decoder and AST
checker from an unpacked wheel, stubbing the unrelated modules they import, and runs both checkers on the same
completions: for every case of BFCL's four Python AST categories, a set of completions derived from the ground
truth (correct, alternative values, omitted optional parameters, string variants, int for float, tuples,
reordered calls, extra or missing parameters, wrong functions, prose and fences...). It prints agreement per
category and every disagreement with both verdicts.

    pip download --no-deps bfcl-eval==2026.3.23 -d /tmp/bfcl && unzip -q /tmp/bfcl/*.whl -d /tmp/bfcl/wheel
    python bench/bfcl_agreement.py --bfcl /tmp/bfcl/wheel [--per-category N] [--out disagreements.jsonl]

BFCL's decoder ``eval``s arithmetic and lambdas in arguments; the completions here are generated from ground
truth by this script (never model output), and none contains either.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import types
from collections import Counter, defaultdict
from pathlib import Path

from ao_calib_tasks.function_call import bfcl
from ao_calib_tasks.function_call.bfcl_checker import score_text

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


# ------------------------------------------------------------------------------------------- BFCL side


def load_bfcl(root: Path):
    """BFCL's ``default_decode_ast_prompting``, ``is_function_calling_format_output`` and ``ast_checker``."""
    sys.path.insert(0, str(root))

    def stub(name: str, **attrs):
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module

    class _Config:  # prompting models keep dotted function names (no underscore_to_dot)
        underscore_to_dot = False

    stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING=defaultdict(_Config))
    for parser in ("java_parser", "js_parser", "json_parser", "xml_parser"):
        stub(f"bfcl_eval.model_handler.parser.{parser}", parse_java_function_call=None,
             parse_javascript_function_call=None, parse_json_function_call=None,
             parse_concise_xml_function_call=None, parse_verbose_xml_function_call=None)
    stub("bfcl_eval.utils")  # the decoder's `from bfcl_eval.utils import *` needs nothing for Python AST
    if "tenacity" not in sys.modules:
        try:
            import tenacity  # noqa: F401
        except ImportError:
            stub("tenacity", retry=None, retry_if_exception_message=None, retry_if_exception_type=None,
                 wait_random_exponential=None)
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    def is_call_list(decoded) -> bool:  # BFCL's is_function_calling_format_output, restated (it lives in the
        return isinstance(decoded, list) and all(  # stubbed bfcl_eval.utils, which imports the world)
            type(item) is dict and len(item) == 1 and type(next(iter(item.values()))) is dict for item in decoded)

    def verdict(text: str, case: dict) -> tuple[bool, str]:
        try:
            decoded = default_decode_ast_prompting(text, ReturnFormat.PYTHON)
        except Exception as exc:  # noqa: BLE001 -- BFCL counts any decoder exception as a failure
            return False, f"ast_decoder:decoder_failed ({type(exc).__name__})"
        if not is_call_list(decoded):
            return False, "ast_decoder:decoder_wrong_output_format"
        result = ast_checker(case["function"], decoded, case["ground_truth"], Language.PYTHON,
                             case["category"], "stub-model")
        return bool(result["valid"]), result.get("error_type", "")

    return verdict


# ------------------------------------------------------------------------------------------ completions


def lit(value) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple):
        return "(" + ", ".join(lit(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in value.items()) + "}"
    return repr(value)


def resolved(value):
    """A concrete value from an acceptable one (dict candidates hold per-key lists)."""
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        return {k: resolved(next(x for x in v if x != "")) for k, v in value.items() if any(x != "" for x in v)}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [resolved(v) for v in value]
    return value


def calls_text(calls: list[tuple[str, dict]]) -> str:
    return "[" + ", ".join(f"{name}(" + ", ".join(f"{k}={lit(v)}" for k, v in args.items()) + ")"
                           for name, args in calls) + "]"


def base_calls(case: dict, pick: str = "first", keep_optional: bool = True) -> list[tuple[str, dict]]:
    calls = []
    for expected in case["ground_truth"]:
        (name, params), = expected.items()
        args = {}
        for p, options in params.items():
            values = [v for v in options if v != ""]
            if not values or (not keep_optional and "" in options):
                continue
            args[p] = resolved(values[0] if pick == "first" else values[-1])
        calls.append((name, args))
    return calls


def _params(case: dict, name: str) -> dict:
    return next(f for f in case["function"] if f["name"] == name)["parameters"]["properties"]


def string_variants(s: str) -> list[str]:
    return [s.upper(), s.replace(" ", "  ") if " " in s else s + " ", s.replace(" ", "-"), s + ".",
            s.replace(",", "") if "," in s else s.replace(" ", ", ", 1), s.title(), s.replace("'", "")]


def variants(case: dict, rng: random.Random) -> list[tuple[str, str]]:
    """(kind, completion) pairs for one case."""
    out: list[tuple[str, str]] = []
    good = base_calls(case)
    text = calls_text(good)
    out.append(("correct", text))
    out.append(("correct, alternative values", calls_text(base_calls(case, pick="last"))))
    out.append(("optional params omitted", calls_text(base_calls(case, keep_optional=False))))
    out.append(("no brackets", text[1:-1]))
    out.append(("single quotes", text.replace('"', "'")))
    out.append(("prose before", "Sure, here are the calls: " + text))
    out.append(("prose after", text + "\nThese calls answer the question."))
    out.append(("fenced, python tag", f"```python\n{text}\n```"))
    out.append(("fenced, no tag", f"```\n{text}\n```"))
    out.append(("one call per line", "\n".join(calls_text([c])[1:-1] for c in good)))
    out.append(("empty list", "[]"))
    out.append(("plain text", "I cannot answer that with these functions."))
    if len(good) > 1:
        out.append(("reordered calls", calls_text(list(reversed(good)))))
        # calls whose values are acceptable for more than one expected call: where first-fit matching can fail
        mixed = [c if i % 2 else alt for i, (c, alt) in enumerate(zip(good, base_calls(case, pick="last")))]
        out.append(("mixed alternative values", calls_text(mixed)))
        out.append(("mixed alternative values, reordered", calls_text(list(reversed(mixed)))))
        shuffled = good[:]
        rng.shuffle(shuffled)
        out.append(("shuffled calls", calls_text(shuffled)))
        out.append(("one call dropped", calls_text(good[:-1])))
    out.append(("call duplicated", calls_text(good + good[:1])))
    other = [f["name"] for f in case["function"] if f["name"] not in {n for n, _ in good}]
    if other:
        out.append(("other function", calls_text([(other[0], good[0][1])] + good[1:])))
    out.append(("misspelt function", calls_text([(good[0][0] + "_v2", good[0][1])] + good[1:])))
    for i, (name, args) in enumerate(good):
        props = _params(case, name)
        def with_args(new_args, i=i, name=name):
            calls = good[:]
            calls[i] = (name, new_args)
            return calls_text(calls)
        out.append(("extra param", with_args({**args, "extra_param": 1})))
        unknown = [p for p in props if p not in args]
        if unknown:
            out.append(("unrequested schema param", with_args({**args, unknown[0]: resolved_default(props[unknown[0]])})))
        for p, v in args.items():
            kind = props.get(p, {}).get("type")
            rest = {k: x for k, x in args.items() if k != p}
            out.append((f"param dropped ({kind})", with_args(rest)))
            out.append((f"positional ({kind})", calls_text(good[:i] + [(name, {})] + good[i + 1:]).replace(
                f"{name}()", f"{name}({lit(v)}" + "".join(f", {k}={lit(x)}" for k, x in rest.items()) + ")", 1)))
            if isinstance(v, bool):
                out.append(("int for bool", with_args({**args, p: int(v)})))
                out.append(("negated bool", with_args({**args, p: not v})))
            elif isinstance(v, int):
                out.append(("float for int", with_args({**args, p: float(v)})))
                out.append(("str for int", with_args({**args, p: str(v)})))
                out.append(("wrong int", with_args({**args, p: v + 1})))
            elif isinstance(v, float):
                if v.is_integer():
                    out.append(("int for float", with_args({**args, p: int(v)})))
                out.append(("wrong float", with_args({**args, p: v + 0.5})))
            elif isinstance(v, str):
                for j, s in enumerate(string_variants(v)):
                    out.append((f"string variant {j}", with_args({**args, p: s})))
                out.append(("wrong string", with_args({**args, p: v + " extra words"})))
            elif isinstance(v, list):
                out.append((f"tuple for {kind}", with_args({**args, p: tuple(v)})))
                if v:
                    out.append(("list reversed", with_args({**args, p: list(reversed(v))})))
                    if all(isinstance(x, str) for x in v):
                        out.append(("list strings upper", with_args({**args, p: [x.upper() for x in v]})))
                    if all(type(x) is float and x.is_integer() for x in v):
                        out.append(("ints in float list", with_args({**args, p: [int(x) for x in v]})))
                    if all(type(x) is int for x in v):
                        out.append(("floats in int list", with_args({**args, p: [float(x) for x in v]})))
            elif isinstance(v, dict) and v:
                k0 = next(iter(v))
                out.append(("dict key dropped", with_args({**args, p: {k: x for k, x in v.items() if k != k0}})))
                out.append(("dict extra key", with_args({**args, p: {**v, "extra_key": 1}})))
                if isinstance(v[k0], str):
                    out.append(("dict string upper", with_args({**args, p: {**v, k0: v[k0].upper()}})))
    return out


def resolved_default(spec: dict):
    return {"string": "x", "integer": 1, "float": 1.0, "boolean": True, "array": [], "dict": {},
            "tuple": [], "any": "x"}.get(spec.get("type"), "x")


# ------------------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bfcl", required=True, type=Path, help="unpacked bfcl-eval wheel (holds bfcl_eval/)")
    parser.add_argument("--per-category", type=int, default=None, help="cases per category (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write every disagreement here as JSON lines")
    args = parser.parse_args(argv)
    bfcl_verdict = load_bfcl(args.bfcl)
    data = args.bfcl / "bfcl_eval" / "data"
    rng = random.Random(args.seed)
    rows, disagreements = [], []
    kinds: Counter = Counter()
    for category in CATEGORIES:
        cases = bfcl.load_question_file(data / f"BFCL_v4_{category}.json")[: args.per_category]
        total = agree = ours_valid = theirs_valid = 0
        for case in cases:
            for kind, text in variants(case, rng):
                ours = score_text(text, case["function"], case["ground_truth"], strict_format=True)
                theirs, their_error = bfcl_verdict(text, case)
                total += 1
                ours_valid += ours.valid
                theirs_valid += theirs
                if ours.valid == theirs:
                    agree += 1
                else:
                    kinds[(category, kind, ours.valid)] += 1
                    disagreements.append({"id": case["id"], "kind": kind, "completion": text, "ours": ours.valid,
                                          "ours_error": ours.error_type, "bfcl": theirs, "bfcl_error": their_error})
        rows.append((category, len(cases), total, ours_valid, theirs_valid, agree))
    print("| category | cases | completions | valid (ours) | valid (BFCL) | agree | agreement |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for category, n, total, ov, tv, agree in rows:
        print(f"| {category} | {n} | {total} | {ov} | {tv} | {agree} | {100 * agree / total:.2f}% |")
    t = [sum(r[i] for r in rows) for i in range(1, 6)]
    print(f"| all | {t[0]} | {t[1]} | {t[2]} | {t[3]} | {t[4]} | {100 * t[4] / t[1]:.2f}% |")
    print("\nDisagreements by category, completion kind and our verdict:")
    for (category, kind, ours), count in sorted(kinds.items()):
        print(f"  {category:18} {kind:30} ours={'valid' if ours else 'invalid':7} BFCL={'invalid' if ours else 'valid':7} x{count}")
    if args.out:
        args.out.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in disagreements))
        print(f"wrote {len(disagreements)} disagreements to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
