"""Generator, schema library and JSONL loader for the Python-style function-calling task."""

from __future__ import annotations

import json
import string
import subprocess
import sys
from pathlib import Path

import pytest

from ao_calib.core.errors import DataValidationError
from ao_calib_tasks.function_call.data import load_dataset, load_rows
from ao_calib_tasks.function_call.generate import (
    SYSTEM,
    format_call,
    generate_rows,
    generate_splits,
    multi_call,
    single_call,
)
from ao_calib_tasks.function_call.parsing import parse_calls
from ao_calib_tasks.function_call.rewards import tool_call_exact
from ao_calib_tasks.function_call.schemas import PARAM_TYPES, SCHEMAS

REPO = Path(__file__).resolve().parents[3]
FIELDS = {"prompt", "answer", "type", "ground_truth", "ground_truth_text", "possible_boxed_answers",
          "is_multi_answer", "confidence", "source"}


@pytest.fixture(scope="module")
def rows():
    return generate_rows(400, seed=0)


# ---------------------------------------------------------------- schemas

def test_schema_library_is_broad():
    assert len(SCHEMAS) >= 20
    assert len({s.name for s in SCHEMAS}) == len(SCHEMAS)
    types = {p.type for s in SCHEMAS for p in s.parameters.values()}
    assert types == set(PARAM_TYPES)
    assert any(p.optional for s in SCHEMAS for p in s.parameters.values())
    assert sum(1 for s in SCHEMAS if s.multi_arg) >= 3


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.name)
def test_templates_mention_exactly_the_arguments_they_use(schema):
    # an optional argument is in the answer iff the query mentions it, so the answer follows from the query
    assert schema.required, "every function needs a required argument (params reward of zero-arg calls is free)"
    assert () in schema.templates and len(schema.templates[()]) >= 2
    for optional, templates in schema.templates.items():
        for template in templates:
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            assert fields == set(schema.required) | set(optional), template
    for template in schema.multi_templates:
        assert schema.multi_arg in {f for _, f, _, _ in string.Formatter().parse(template) if f}


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.name)
def test_every_schema_round_trips(schema):
    import random

    rng = random.Random(schema.name)
    for _ in range(30):
        query, calls = single_call(schema, rng)
        if schema.multi_arg:
            calls += multi_call(schema, rng)[1]
        for args in calls:
            text = format_call(schema.name, args)
            [parsed] = parse_calls(text)
            assert parsed.name == schema.name and parsed.kwargs == args
            assert type(parsed.kwargs) is dict and all(type(parsed.kwargs[k]) is type(v) for k, v in args.items())
            assert tool_call_exact([text], [text]) == [1.0]


# ---------------------------------------------------------------- generator

def test_rows_have_the_seed_format(rows):
    for row in rows:
        assert set(row) == FIELDS
        assert row["type"] == "tool_call" and row["confidence"] == 1.0 and row["source"] == "ao_calib_generated"
        assert row["prompt"].startswith(SYSTEM)
        defs = json.loads(row["prompt"][len(SYSTEM):].rsplit("\n\n", 1)[0])
        assert 2 <= len(defs) <= 5
        assert [d["name"] for d in defs] == row["possible_boxed_answers"]
        for d in defs:
            assert set(d) == {"name", "description", "parameters"}
            assert all(set(p) == {"description", "type"} for p in d["parameters"].values())
        calls = parse_calls(row["answer"])
        assert len(calls) == len(row["answer"].split("\n"))
        assert row["ground_truth"] == row["ground_truth_text"] == calls[0].name
        assert {c.name for c in calls} <= set(row["possible_boxed_answers"])
        assert row["is_multi_answer"] == (len(calls) > 1)
        assert tool_call_exact([row["answer"]], [row["answer"]]) == [1.0]


def test_generation_is_deterministic():
    assert generate_rows(50, seed=3) == generate_rows(50, seed=3)
    assert generate_rows(50, seed=3) != generate_rows(50, seed=4)
    assert generate_splits(30, 10, seed=1) == generate_splits(30, 10, seed=1)


def test_multi_call_rows_exist(rows):
    multi = [r for r in rows if r["is_multi_answer"]]
    assert len(multi) > 40
    assert any(len(parse_calls(r["answer"])) >= 3 for r in multi)
    assert any(len({c.name for c in parse_calls(r["answer"])}) == 1 for r in multi)  # same function repeated
    assert any(len({c.name for c in parse_calls(r["answer"])}) == 2 for r in multi)  # two different functions


def test_optional_arguments_sometimes_present(rows):
    seen: dict[str, set[bool]] = {}
    for row in rows:
        for call in parse_calls(row["answer"]):
            if call.name == "get_weather":
                seen.setdefault("units", set()).add("units" in call.kwargs)
            if call.name == "sort_list":
                seen.setdefault("descending", set()).add("descending" in call.kwargs)
    assert seen == {"units": {True, False}, "descending": {True, False}}


def test_queries_vary(rows):
    queries = {r["prompt"].rsplit("\n\n", 1)[1] for r in rows}
    assert len(queries) > 300
    openings = {q.split()[0] for q in queries}
    assert len(openings) > 10


def test_splits_have_disjoint_prompts():
    train, test = generate_splits(300, 60, seed=0)
    assert len(train) == 300 and len(test) == 60
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in test}


# ---------------------------------------------------------------- loader

def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_loader_accepts_generated_file_and_keeps_extra_fields(tmp_path):
    generated = generate_rows(10, seed=0)
    generated[3]["difficulty"] = "hard"
    path = write(tmp_path / "d.jsonl", [json.dumps(r) for r in generated])
    assert load_rows(path) == generated
    ds = load_dataset(path)
    assert len(ds) == 10 and set(ds.column_names) == FIELDS | {"difficulty"}
    assert ds[3]["difficulty"] == "hard" and ds[0]["difficulty"] is None
    assert ds[0]["possible_boxed_answers"] == generated[0]["possible_boxed_answers"]


def _good() -> dict:
    return generate_rows(1, seed=0)[0]


def _without(field: str) -> dict:
    row = _good()
    del row[field]
    return row


def _with(field: str, value) -> dict:
    return {**_good(), field: value}


BAD_ROWS = [
    ("{not json", None, "not valid JSON"),
    ("[1, 2]", None, "JSON object"),
    *[(json.dumps(_without(f)), f, "missing") for f in sorted(FIELDS)],
    (json.dumps(_with("prompt", "   ")), "prompt", "non-empty string"),
    (json.dumps(_with("answer", 5)), "answer", "string"),
    (json.dumps(_with("answer", "I don't know")), "answer", "no function call"),
    (json.dumps(_with("possible_boxed_answers", ["a", 1])), "possible_boxed_answers", "list of strings"),
    (json.dumps(_with("possible_boxed_answers", "a")), "possible_boxed_answers", "list of strings"),
    (json.dumps(_with("is_multi_answer", "false")), "is_multi_answer", "boolean"),
    (json.dumps(_with("confidence", True)), "confidence", "number"),
    (json.dumps(_with("confidence", "1.0")), "confidence", "number"),
    (json.dumps(_with("type", None)), "type", "string"),
]


@pytest.mark.parametrize("line,field,reason", BAD_ROWS, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD_ROWS)])
def test_loader_rejects_malformed_rows(tmp_path, line, field, reason):
    # the bad row is the second non-blank line (row 1) but physical line 3
    path = write(tmp_path / "bad.jsonl", [json.dumps(_good()), "", line])
    with pytest.raises(DataValidationError) as err:
        load_rows(path)
    e = err.value
    assert (e.source, e.row, e.field) == (str(path), 1, field)
    message = str(e)
    assert "row 1" in message and "line 3" in message and reason in message
    if field:
        assert f"field '{field}'" in message


def test_loader_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_rows(tmp_path / "nope.jsonl")
    empty = write(tmp_path / "empty.jsonl", ["", "  "])
    with pytest.raises(DataValidationError) as err:
        load_rows(empty)
    assert err.value.row == 0 and err.value.reason == "no rows"


# ---------------------------------------------------------------- CLI

def test_cli_writes_both_splits(tmp_path):
    out = tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "-m", "ao_calib_tasks.function_call.generate", "--out", str(out), "--n", "40", "--seed", "7"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    train, test = load_rows(out / "train.jsonl"), load_rows(out / "test.jsonl")
    assert len(train) == 40 and len(test) == 20  # default test size is max(20, N // 10)
    assert "40 train" in result.stdout and "20 test" in result.stdout
    assert (train, test) == generate_splits(40, 20, seed=7)


def test_task_rows_carry_the_expected_calls_as_the_warmup_completion(tmp_path):
    # warmup=sft trains on the `completion` column: the default output format's expected calls
    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import build_task

    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "warmup=sft", "task.data.generate.n_train=4",
                              "task.data.generate.n_test=2", f"paths.cache_dir={tmp_path}"])
    task = build_task(cfg)
    data = task.build_data(tokenizer=None)
    for row in data.train:
        assert row["completion"] == row["answer"] and parse_calls(row["completion"])


@pytest.mark.parametrize("task", ["function_call", "function_call_bfcl", "tool_json"])
def test_trainer_seed_alone_draws_other_generated_data_unless_the_generator_seed_is_set(tmp_path, task):
    """One seed key (trainer.seed) changes every random choice of a run, the generated rows and splits included;
    task.data.generate.seed, where set, wins."""
    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import build_task

    name, extra = ("function_call", ["task.data.format=bfcl"]) if task == "function_call_bfcl" else (task, [])
    sizes = (["task.data.generate.n=40"] if name == "tool_json"
             else ["task.data.generate.n_train=12", "task.data.generate.n_test=4"])

    def rows(*overrides):
        cfg = compose_run_config([f"task={name}", "model=tiny_qwen3", *extra, *sizes, f"paths.cache_dir={tmp_path}",
                                  *overrides])
        data = build_task(cfg).build_data(tokenizer=None)
        return [r["prompt"][-1]["content"] for r in data.train] + [r["prompt"][-1]["content"] for r in data.test]

    assert rows("trainer.seed=1") == rows("trainer.seed=1")
    assert rows("trainer.seed=1") != rows("trainer.seed=2")
    assert rows("trainer.seed=1", "task.data.generate.seed=5") == rows("trainer.seed=2", "task.data.generate.seed=5")
