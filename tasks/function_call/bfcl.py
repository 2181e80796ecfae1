"""BFCL data: question files with their ``possible_answer`` files, validated, and prompted as BFCL prompts.

A BFCL question file (``BFCL_v4_simple_python.json`` and the like; JSON lines despite the name) holds rows of
``id``, ``question`` (a list of turns, each a list of ``{"role", "content"}`` messages) and ``function`` (the
JSON-schema docs of the callable functions). Its ground truth lives in ``possible_answer/<same name>`` as rows of
``id`` and ``ground_truth``: one ``{function: {param: [acceptable values]}}`` per expected call. A row may also
carry its ground truth itself, as ``ground_truth`` or ``possible_answer`` (the scorer's input format).

Prompts follow BFCL's default for prompting models: an instruction to answer only with
``[func(param=value, ...), ...]`` and the function docs as JSON in the system turn, then the question's turn.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from pathlib import Path
from typing import Any

from ao_calib.core.errors import DataValidationError, MissingDataFileError
from ao_calib.core.io import read_jsonl
from .bfcl_checker import SCHEMA_TYPES

log = logging.getLogger(__name__)

IRRELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance")
"""BFCL's categories where no listed function fits: the right answer makes no call. BFCL ships no
``possible_answer`` file for them; their ground truth is the empty list."""
SUPPORTED_CATEGORIES = ("simple", "simple_python", "multiple", "parallel", "parallel_multiple",
                        "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
                        *IRRELEVANCE_CATEGORIES)
"""BFCL's single-turn Python AST categories (``simple`` is v3's name of ``simple_python``) and its relevance
categories."""

SYSTEM_PROMPT = (
    "You are an expert at composing function calls. You get a question and a set of functions you may call. "
    "Answer the question with one or more function calls. If no function fits, or the question lacks a value a "
    "function needs, say so.\n"
    "Reply with the function calls only, in the form "
    "[func_name1(param_name1=value1, param_name2=value2...), func_name2(params)], with no other text.\n\n"
    "The functions you may call, {written}:\n{functions}\n"
)
"""BFCL's default prompt for prompting models in substance (its output format, JSON function docs in the
system turn), in this project's words."""


def category_of(case_id: str) -> str:
    """``simple_python_12`` -> ``simple_python``; ``live_parallel_multiple_3-2-1`` -> ``live_parallel_multiple``."""
    head = case_id.rsplit("_", 1)[0] if "_" in case_id else case_id
    return head


DOCS_STYLES = ("indented", "compact", "signatures")
"""How the function docs are written: as JSON, ``indented`` (four spaces a level, a line per key) or ``compact`` (one
line, no space after a separator), the same docs either way; or ``signatures``, a line a function (its Python-style
signature and what it does, without the parameters' and the response's descriptions: a fraction of the tokens).
``task.data.bfcl_docs`` says what each costs."""

_PYTHON_TYPES = {"string": "str", "integer": "int", "float": "float", "number": "float", "boolean": "bool",
                 "array": "list", "dict": "dict", "object": "dict", "tuple": "tuple", "any": "Any"}


def signature(function: dict) -> str:
    """``wc(file_name: str, mode: str = 'l'): Count the number of lines, words, and characters in a file.``: the
    required parameters first, an optional one with its default (``= ...`` where it has none); the description
    is the text after BFCL's ``Tool description:`` (its class's preamble dropped), to its first sentence's end."""
    parameters = function.get("parameters") or {}
    properties, required = parameters.get("properties") or {}, set(parameters.get("required") or ())

    def typed(name: str, spec: dict) -> str:
        kind = _PYTHON_TYPES.get(str(spec.get("type")), str(spec.get("type", "Any")))
        item = (spec.get("items") or {}).get("type") if kind == "list" else None
        text = f"{name}: {kind}" + (f"[{_PYTHON_TYPES.get(item, item)}]" if item else "")
        if name in required:
            return text
        return text + (f" = {spec['default']!r}" if "default" in spec else " = ...")

    ordered = sorted(properties.items(), key=lambda item: item[0] not in required)
    description = str(function.get("description", "")).split("Tool description:")[-1].strip()
    first = description.split(". ")[0].rstrip(".")
    return f"{function['name']}({', '.join(typed(n, spec) for n, spec in ordered)}): {first}."


def docs_text(functions: list[dict], style: str = "indented") -> str:
    if style == "indented":
        return json.dumps(functions, indent=4)
    if style == "compact":
        return json.dumps(functions, separators=(",", ":"))
    if style == "signatures":
        return "\n".join(map(signature, functions))
    raise ValueError(f"docs style {style!r}: expected one of {', '.join(DOCS_STYLES)}")


def system_prompt(functions: list[dict], docs: str = "indented") -> str:
    written = "one a line" if docs == "signatures" else "in JSON"
    return SYSTEM_PROMPT.format(functions=docs_text(functions, docs), written=written)


def prompt_messages(row: dict, docs: str = "indented") -> list[dict[str, str]]:
    """The chat a model answers: the system turn with the function docs, then the question's messages."""
    return [{"role": "system", "content": system_prompt(row["function"], docs)}, *row["question"][0]]


def reference_call_text(ground_truth: list[dict]) -> str:
    """One correct answer in BFCL's format: each parameter's first acceptable value, left out where that is
    ``""`` (omission: BFCL lists most optional parameters as ``["", default]``), so the SFT target does not add a
    default the question never asked for; a value the question states comes first (:func:`_acceptable`)."""
    calls = []
    for expected in ground_truth:
        (name, params), = expected.items()
        args = [f"{p}={_py_literal(_first_value(options))}" for p, options in params.items()
                if options and options[0] != ""]
        calls.append(f"{name}({', '.join(args)})")
    return "[" + ", ".join(calls) + "]"


def _first_value(options: list) -> Any:
    """The first acceptable value; a dict's acceptable values are themselves per-key lists, resolved the same way."""
    value = next(v for v in options if v != "")
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        return {k: _first_value(v) for k, v in value.items() if any(x != "" for x in v)}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_first_value([v]) for v in value]
    return value


def _py_literal(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are valid Python
    if isinstance(value, list):
        return "[" + ", ".join(_py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py_literal(k)}: {_py_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


# --------------------------------------------------------------------------------------------- validation


def _fail(source: str, index: int, field: str | None, line_no: int, reason: str):
    raise DataValidationError(source, index, field, f"(line {line_no}) {reason}")


def validate_case(row: Any, source: str, index: int, line_no: int) -> dict:
    """A BFCL case with its ground truth, checked so a bad file fails at load time naming the field."""
    if not isinstance(row, dict):
        _fail(source, index, None, line_no, f"expected a JSON object, got {type(row).__name__}")
    if not isinstance(row.get("id"), str) or not row["id"]:
        _fail(source, index, "id", line_no, "missing or not a non-empty string")
    category = row.get("category") or category_of(row["id"])
    if "java" in category:
        _fail(source, index, "id", line_no, f"category {category!r}: only Python categories are supported "
                                            f"({', '.join(SUPPORTED_CATEGORIES)})")
    question = row.get("question")
    if not (isinstance(question, list) and len(question) == 1 and isinstance(question[0], list) and question[0]
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in question[0])):
        _fail(source, index, "question", line_no,
              "expected one turn: [[{\"role\": ..., \"content\": ...}, ...]] (multi-turn cases are not supported)")
    functions = row.get("function")
    if not isinstance(functions, list) or not functions:
        _fail(source, index, "function", line_no, "expected a non-empty list of function docs")
    for f in functions:
        props = (f.get("parameters") or {}).get("properties") if isinstance(f, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(props, dict):
            _fail(source, index, "function", line_no, "each function needs a name and parameters.properties")
        for p, spec in props.items():
            if not isinstance(spec, dict) or spec.get("type") not in SCHEMA_TYPES:
                _fail(source, index, "function", line_no, f"{f['name']}.{p}: type {spec.get('type')!r} "
                                                          f"is not one of {', '.join(SCHEMA_TYPES)}")
    truth = row.get("ground_truth", row.get("possible_answer"))
    if isinstance(truth, dict) and "ground_truth" in truth:  # a whole possible_answer row pasted in
        truth = truth["ground_truth"]
    field = "ground_truth" if "ground_truth" in row else "possible_answer"
    if category in IRRELEVANCE_CATEGORIES:
        if truth is None:
            truth = []
        if truth != []:
            _fail(source, index, field, line_no, f"category {category!r} expects no call: the ground truth must be "
                                                 "[] (or absent)")
    elif not isinstance(truth, list) or not truth:
        _fail(source, index, field, line_no, "expected a non-empty list of {function: {param: [values]}}")
    names = {f["name"] for f in functions}
    for expected in truth:
        if not (isinstance(expected, dict) and len(expected) == 1):
            _fail(source, index, field, line_no, "each expected call is a one-key object {function: {...}}")
        (name, params), = expected.items()
        if name not in names:
            _fail(source, index, field, line_no, f"expected function {name!r} is not among the function docs")
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            _fail(source, index, field, line_no, f"{name}: each parameter maps to a list of acceptable values")
    return {"id": row["id"], "category": category, "question": question, "function": functions,
            "ground_truth": truth}


def answers_file(question_file: Path) -> Path:
    """Where BFCL keeps a question file's ground truth: ``possible_answer/`` beside it, same name."""
    return question_file.parent / "possible_answer" / question_file.name


def file_category(path: Path) -> str | None:
    """``BFCL_v4_simple_python.json`` -> ``simple_python``; None for a file not named as BFCL names them."""
    return path.stem.split("_", 2)[-1] if path.stem.startswith("BFCL_") else None


def is_bfcl_folder(path: str | Path | None) -> bool:
    """A directory laid out as BFCL's ``bfcl_eval/data``: question files named as BFCL names them
    (``BFCL_v4_simple_python.json``, ...), their ground truth in ``possible_answer/``."""
    return bool(path) and Path(path).is_dir() and any(
        file_category(f) is not None for f in Path(path).glob("BFCL_*.json*"))


def data_format(stated: str, paths: dict[str, str | None]) -> str:
    """The format ``task.data`` is read in: ``stated``, or ``bfcl`` where it says ``rows`` but one of ``paths``
    (``{key: path}``) is a folder in BFCL's layout (rows come from files only, so such a folder means BFCL data:
    ``ao_calib.eval run_dir=RUN task.data.test_path=DIR`` on a run trained on rows). A rows file beside such a folder
    is refused, naming both keys."""
    folders = [key for key, path in paths.items() if is_bfcl_folder(path)]
    if stated != "rows" or not folders:
        return stated
    rows = [key for key, path in paths.items() if path and key not in folders
            and file_category(Path(path)) is None]
    if rows:
        raise ValueError(f"data.{folders[0]}={paths[folders[0]]} is a folder in BFCL's layout, which is read as "
                         f"task.data.format=bfcl, but task.data.{rows[0]}={paths[rows[0]]} is not a BFCL file: give "
                         "every path in one format (set task.data.format=bfcl where it is a BFCL question file)")
    _say_read_as_bfcl(folders[0], str(paths[folders[0]]))
    return "bfcl"


@functools.lru_cache(maxsize=None)
def _say_read_as_bfcl(key: str, path: str) -> None:
    # once per process: the config is built into its schema more than once before the data loads
    log.info("task.data.%s=%s is a folder in BFCL's layout: read as task.data.format=bfcl", key, path)


def load_question_file(path: str | Path) -> list[dict]:
    """Validated cases of one question file, joined by ``id`` with its ``possible_answer`` file when the rows
    do not carry their own ground truth."""
    path = Path(path)
    rows = read_jsonl(path, "BFCL file")
    irrelevance = file_category(path) in IRRELEVANCE_CATEGORIES
    if irrelevance and not answers_file(path).is_file():
        return [validate_case(row, str(path), i, line_no) for i, (line_no, row) in enumerate(rows)]
    if not all(isinstance(r, dict) and ("ground_truth" in r or "possible_answer" in r) for _, r in rows):
        answer_path = answers_file(path)
        if not answer_path.is_file():
            raise MissingDataFileError(f"{path}: rows have no ground_truth and {answer_path} does not exist")
        truth = {}
        for line_no, answer in read_jsonl(answer_path, "BFCL possible_answer file"):
            if not isinstance(answer, dict) or "id" not in answer or "ground_truth" not in answer:
                raise DataValidationError(str(answer_path), len(truth), "ground_truth",
                                          f"(line {line_no}) rows need id and ground_truth")
            truth[answer["id"]] = answer["ground_truth"]
        joined = []
        for i, (line_no, row) in enumerate(rows):
            if isinstance(row, dict) and row.get("id") not in truth:
                raise DataValidationError(str(path), i, "id", f"(line {line_no}) {row.get('id')!r} has no "
                                                              f"ground truth in {answer_path}")
            joined.append((line_no, {**row, "ground_truth": truth[row["id"]]} if isinstance(row, dict) else row))
        rows = joined
    return [validate_case(row, str(path), i, line_no) for i, (line_no, row) in enumerate(rows)]


def load_cases(path: str | Path) -> list[dict]:
    """One question file, or every supported category's question file in a directory laid out as BFCL's
    ``bfcl_eval/data`` (files of other categories, e.g. multi-turn, are skipped with a note)."""
    path = Path(path)
    if not path.is_dir():
        return load_question_file(path)
    cases = []
    for file in sorted(path.glob("*.json*")):
        category = file_category(file)
        if category not in SUPPORTED_CATEGORIES or not (answers_file(file).is_file()
                                                        or category in IRRELEVANCE_CATEGORIES):
            log.info("BFCL: skipping %s (category %s not supported or no possible_answer file)", file.name, category)
            continue
        cases += load_question_file(file)
    if not cases:
        raise MissingDataFileError(f"no BFCL question file of a supported category in {path}")
    return cases


def training_row(case: dict, suffix: str = "", docs: str = "indented") -> dict:
    """A dataset row: chat prompt (the docs written in ``docs`` style, :data:`DOCS_STYLES`), a reference answer
    (also the SFT warm-up target), and the case as JSON text (the schemas vary per row, which a columnar dataset
    cannot hold as nested columns)."""
    messages = prompt_messages(case, docs)
    if suffix:
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + suffix}
    reference = reference_call_text(case["ground_truth"])
    return {"prompt": messages, "answer": reference, "completion": reference, "id": case["id"],
            "kind": case["category"], "bfcl_functions": json.dumps(case["function"]),
            "bfcl_ground_truth": json.dumps(case["ground_truth"])}


# ---------------------------------------------------------------------------------- generated BFCL data


_TYPE_NAMES = {"int": "integer", "float": "float", "str": "string", "bool": "boolean"}


def _json_schema(param_type: str) -> dict:
    if param_type.startswith("list["):
        return {"type": "array", "items": {"type": _TYPE_NAMES[param_type[5:-1]]}}
    return {"type": _TYPE_NAMES[param_type]}


def _default_text(value: Any) -> str:
    """A default as BFCL's docs write it in a description (``Default is false.``, ``Default is 'km'.``)."""
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)


def _param_description(spec) -> str:
    # real BFCL docs state an optional parameter's default (123 of the fixture's parameters in the description,
    # 58 as a "default" key), and their possible answers accept it: the generated cases do the same
    if spec.optional and spec.default is not None:
        return f"{spec.description} Default is {_default_text(spec.default)}."
    return spec.description


def _function_doc(schema) -> dict:
    """A generator schema as a BFCL function doc."""
    return {"name": schema.name, "description": schema.description, "parameters": {
        "type": "dict",
        "properties": {p: {**_json_schema(spec.type), "description": _param_description(spec)}
                       for p, spec in schema.parameters.items()},
        "required": schema.required}}


def _acceptable(spec, stated: bool, value: Any = None) -> list:
    """A parameter's possible answers the way BFCL writes them: the stated value; an optional parameter left
    unstated may be omitted (``""``) or given its default; one stated at its default may also be omitted (BFCL
    lists ``"pressure": ["", 1]`` for a question that says "under 1 atmosphere")."""
    has_default = spec.optional and spec.default is not None
    if not stated:
        return ["", spec.default] if has_default else [""]
    return [value, ""] if has_default and value == spec.default and type(value) is type(spec.default) else [value]


SYNTHETIC_POOL = 400
"""Made-up functions a run with ``generate.bfcl_synthetic`` draws from (per generator seed)."""


def _verb(name: str) -> str:
    """The first word of a function's bare name: ``calculate`` for ``finance.calculate_loan_interest``."""
    return name.rsplit(".", 1)[-1].split("_", 1)[0]


def near_misses(needed: set[str], library) -> list[str]:
    """Functions of ``library`` a query for ``needed`` could be mistaken for: not needed, but named with the same
    verb (``calculate_time`` for a question about the time) or taking a parameter of the same name (a city, a
    height). BFCL's irrelevance cases are mostly such near misses; a doc drawn at random is seldom one."""
    wanted = [s for s in library if s.name in needed]
    verbs = {_verb(s.name) for s in wanted}
    params = {p for s in wanted for p in s.parameters}
    return sorted(s.name for s in library if s.name not in needed
                  and (_verb(s.name) in verbs or params & set(s.parameters)))


def generated_cases(n: int, seed: int, tag: str, distractors: int, irrelevance: float = 0.0,
                    synthetic: float = 0.0, near_miss: float = 0.0, parallel_each: float = 0.0,
                    context: float = 0.0, parallel_story: float = 0.0) -> list[dict]:
    """BFCL-format cases from the offline generator (its functions as JSON-schema docs, the stated value of each
    parameter acceptable; an optional one the query does not mention may be omitted or, as in BFCL, given the
    default its doc states: :func:`_acceptable`), for runs without BFCL files.
    ``distractors``: docs of functions the answer does not call, shown beside the needed ones (at most what the
    generator's row offers); with none, a single call falls in BFCL's ``simple`` category instead of ``multiple``.
    ``irrelevance``: the share of cases in BFCL's irrelevance category (the query shown only functions it does
    not need, at least one; the right answer makes no call). The other cases are drawn as without it.
    ``synthetic``: the share of cases whose functions are made up (:mod:`.synthetic`, a pool of
    ``SYNTHETIC_POOL`` functions drawn from ``seed``) instead of taken from the hand-written library.
    ``near_miss``: the share of irrelevance cases whose first shown doc is a near miss (:func:`near_misses`, from
    the library the case was drawn from) instead of any function the query does not need.
    ``parallel_each``: the share of made-up functions' one-function parallel queries that give every call its own
    arguments (:func:`.generate.each_call`) instead of varying one.
    ``parallel_story``: the share of the others told one sentence a call (:func:`.generate.story_call`).
    ``context``: the share of cases (irrelevance cases alike) whose query is set in sentences of context
    (:func:`.generate.with_context`), so that a query's length does not tell whether it needs a call."""
    from .generate import hash_seed, make_row, with_context
    from .parsing import parse_calls
    from .schemas import BY_NAME, SCHEMAS
    from .synthetic import synthetic_functions

    rng = random.Random(hash_seed(seed, f"bfcl/{tag}"))
    # A separate stream decides which cases are irrelevance cases, so the others are the same cases as without.
    relevance_rng = random.Random(hash_seed(seed, f"bfcl/{tag}/irrelevance"))
    # the same for made-up functions: without them, the cases are the ones the library alone always gave
    library_rng = random.Random(hash_seed(seed, f"bfcl/{tag}/synthetic"))
    near_rng = random.Random(hash_seed(seed, f"bfcl/{tag}/near_miss"))
    each_rng = random.Random(hash_seed(seed, f"bfcl/{tag}/parallel_each"))
    context_rng = random.Random(hash_seed(seed, f"bfcl/{tag}/context"))
    story_rng = random.Random(hash_seed(seed, f"bfcl/{tag}/parallel_story"))
    made_up = synthetic_functions(SYNTHETIC_POOL, seed) if synthetic else ()
    by_name = {**BY_NAME, **{s.name: s for s in made_up}}
    cases = []
    for i in range(n):
        library = made_up if synthetic and library_rng.random() < synthetic else SCHEMAS
        row = make_row(rng, library, parallel_each, each_rng, parallel_story, story_rng)
        needed = {c.name for c in parse_calls(row["answer"])}
        unneeded = [n for n in row["possible_boxed_answers"] if n not in needed]
        # the needed functions and the distractors: BFCL's Python categories show 1-4 docs, and every doc costs
        # prompt tokens at each step
        shown = [n for n in row["possible_boxed_answers"] if n in needed]
        shown += unneeded[:distractors]
        rng.shuffle(shown)
        query = row["prompt"].rsplit("\n\n", 1)[-1]
        if context and context_rng.random() < context:
            query = with_context(query, context_rng)
        if irrelevance and relevance_rng.random() < irrelevance and unneeded:
            names = unneeded[:max(1, distractors)]
            if near_miss and near_rng.random() < near_miss and (close := near_misses(needed, library)):
                first = near_rng.choice(close)
                names = [first] + [name for name in names if name != first][:len(names) - 1]
            functions = [_function_doc(by_name[name]) for name in names]
            cases.append({"id": f"irrelevance_{tag}{i}", "category": "irrelevance",
                          "question": [[{"role": "user", "content": query}]], "function": functions,
                          "ground_truth": []})
            continue
        functions = [_function_doc(by_name[name]) for name in shown]
        truth = []
        for call in parse_calls(row["answer"]):
            schema = by_name[call.name]
            given = call.kwargs
            truth.append({call.name: {p: _acceptable(spec, p in given, given.get(p))
                                      for p, spec in schema.parameters.items()}})
        calls = len(truth)
        distinct = len({next(iter(t)) for t in truth})
        category = "simple" if calls == 1 and len(functions) == 1 else "multiple" if calls == 1 else \
            "parallel" if distinct == 1 else "parallel_multiple"
        cases.append({"id": f"{category}_{tag}{i}", "category": category,
                      "question": [[{"role": "user", "content": query}]], "function": functions,
                      "ground_truth": truth})
    return cases
