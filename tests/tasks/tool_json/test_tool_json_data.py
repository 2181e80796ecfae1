"""Generator, loader and prompts of the JSON tool-calling task (task=tool_json)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from ao_calib.core.errors import DataValidationError
from ao_calib_tasks.tool_json.data import load_rows
from ao_calib_tasks.tool_json.generate import (SOURCE, generate_rows, generate_splits,
                                               generate_three_splits, output_paths)
from ao_calib_tasks.tool_json.prompts import SYSTEM_PROMPT, expected_output, messages
from ao_calib_tasks.tool_json.rewards import score_completion
from ao_calib_tasks.tool_json.safe_eval import parse_expression, safe_eval
from ao_calib_tasks.tool_json.schema import FIELDS
from ao_calib_tasks.tool_json.templates import AUTHORS, CAPITALS, format_number

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def rows():
    return generate_rows(900, seed=0)


def by_category(rows, category):
    return [r for r in rows if r["category"] == category]


# ------------------------------------------------------------------------------------------ generator


def test_rows_have_exactly_the_seed_schema(rows):
    for row in rows:
        assert tuple(row) == FIELDS
        assert isinstance(row["id"], str) and row["source"] == SOURCE
        assert isinstance(row["prompt"], str) and row["prompt"].strip()
        assert isinstance(row["expected_answer"], str) and row["expected_answer"].strip()
        shape = {"calculator": (True, "calculator", {"expression"}), "python_exec": (True, "python", {"code"}),
                 "no_tool": (False, None, None)}[row["category"]]
        assert (row["tool_needed"], row["tool"]) == shape[:2]
        assert (set(row["tool_args"]) if row["tool_args"] is not None else None) == shape[2]
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["prompt"] for r in rows}) == len(rows)


def test_generation_is_deterministic():
    assert generate_rows(120, seed=3) == generate_rows(120, seed=3)
    assert generate_rows(120, seed=3) != generate_rows(120, seed=4)
    assert generate_splits(100, seed=2) == generate_splits(100, seed=2)


def test_all_categories_present_in_sensible_shares(rows):
    counts = Counter(r["category"] for r in rows)
    assert set(counts) == {"calculator", "python_exec", "no_tool"}
    assert all(counts[c] >= 0.15 * len(rows) for c in counts), counts


def test_calculator_prompts_are_varied(rows):
    calc = by_category(rows, "calculator")
    prompts = " ".join(r["prompt"] for r in calc)
    exprs = [r["tool_args"]["expression"] for r in calc]
    for word in ("total", "per ", "%", "interest", "compounded", "area", "speed", "Fahrenheit", "average",
                 "servings", "remainder", "square root"):
        assert word in prompts, word
    assert any("((" in e for e in exprs)  # nested parentheses
    assert any(re.search(r"\(.*\(.*\).*\)", e) for e in exprs)
    assert any("**" in e for e in exprs) and any("** -" in e for e in exprs)
    assert any(" / " in e for e in exprs) and any("//" in e for e in exprs) and any("%" in e for e in exprs)
    assert any(re.search(r"\d\.\d", e) for e in exprs)  # decimals
    assert any(e.startswith("-") for e in exprs)
    assert any("^" in r["prompt"] or "×" in r["prompt"] for r in calc)  # prompts in everyday notation
    assert len({r["prompt"].split()[0] for r in calc}) >= 15


def test_python_programs_are_varied(rows):
    py = by_category(rows, "python_exec")
    codes = [r["tool_args"]["code"] for r in py]
    for marker in ("[::-1]", "sorted(", "for ", "while ", ".count(", "Counter", ".split()", "join(", "bin(",
                   "reverse=True", "dict.fromkeys", "% 2 == 0", "fib", "sum(", "len("):
        assert any(marker in c for c in codes), marker
    assert any("\n" in c for c in codes) and any("\n" not in c for c in codes)
    assert all(c.count("print(") >= 1 for c in codes)
    assert len({r["prompt"].split()[0] for r in py}) >= 4
    assert len(set(codes)) >= 0.9 * len(codes)  # different phrasings may share a program


def test_no_tool_questions_are_varied(rows):
    no_tool = by_category(rows, "no_tool")
    answers = {r["expected_answer"] for r in no_tool}
    assert answers & set(CAPITALS.values()) and answers & set(AUTHORS.values())
    assert any(r["prompt"].startswith(("Hello", "Hi", "Good morning")) for r in no_tool)
    assert any("stand for" in r["prompt"] for r in no_tool)
    assert len(answers) >= 40


def test_calculator_answers_are_computed(rows):
    for row in by_category(rows, "calculator"):
        expr = row["tool_args"]["expression"]
        assert parse_expression(expr) is not None
        # an independent evaluation: plain Python on a string the static check has shown to be pure arithmetic
        value = eval(compile(expr, "<expr>", "eval"), {"__builtins__": {}})
        assert math.isclose(float(row["expected_answer"]), value, rel_tol=1e-9), row
        assert row["expected_answer"] == format_number(safe_eval(expr))


def _spot(rows, pattern):
    hits = [(m, r) for r in rows if (m := re.fullmatch(pattern, r["prompt"]))]
    assert hits, pattern
    return hits


def test_word_problem_answers_spot_checked(rows):
    calc = by_category(rows, "calculator")
    for m, r in _spot(calc, r"What is ([\d.]+)% of (\d+)\?"):
        assert math.isclose(float(r["expected_answer"]), float(m[1]) * int(m[2]) / 100, rel_tol=1e-9)
    for m, r in _spot(calc, r"I bought (\d+) .+ at \$([\d.]+) each and (\d+) .+ at \$([\d.]+) each\. .*"):
        total = int(m[1]) * float(m[2]) + int(m[3]) * float(m[4])
        assert math.isclose(float(r["expected_answer"]), total, rel_tol=1e-9)
    for m, r in _spot(calc, r"If I invest \$(\d+) at ([\d.]+)% annual interest compounded yearly, how much will "
                            r"I have after (\d+) years\?"):
        value = int(m[1]) * (1 + float(m[2]) / 100) ** int(m[3])
        assert math.isclose(float(r["expected_answer"]), value, rel_tol=1e-9)


def test_python_answers_spot_checked(rows):
    py = by_category(rows, "python_exec")
    for m, r in _spot(py, r"Write Python code to reverse the string \"(.+)\"\.|Use Python to reverse \"(.+)\"\."):
        assert r["expected_answer"] == (m[1] or m[2])[::-1]
    for m, r in _spot(py, r"Use Python to calculate (\d+)! using a for loop\."
                          r"|Write a Python program that computes (\d+) factorial with a loop\."):
        assert r["expected_answer"] == str(math.factorial(int(m[1] or m[2])))
    for m, r in _spot(py, r"Use Python to find F\((\d+)\) in the Fibonacci sequence .*"):
        a, b = 0, 1
        for _ in range(int(m[1])):
            a, b = b, a + b
        assert r["expected_answer"] == str(a)


def test_python_answers_match_what_the_programs_print(rows, tmp_path):
    """The generator never runs code; this test checks it computed what the programs print by running them.

    Only programs our own templates produced are run (never model output), in an
    isolated interpreter (-I), in a scratch directory, under a timeout.
    """
    programs = [r["tool_args"]["code"] for r in by_category(rows, "python_exec")][:120]
    runner = textwrap.dedent("""
        import contextlib, io, json, sys
        out = []
        for code in json.load(sys.stdin):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(code, "<generated>", "exec"), {"__name__": "__main__"})
            out.append(buf.getvalue())
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-I", "-c", runner], input=json.dumps(programs), capture_output=True,
                          text=True, timeout=20, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    expected = [r["expected_answer"] for r in by_category(rows, "python_exec")][:120]
    assert [p.rstrip("\n") for p in printed] == expected


def test_splits_are_disjoint_by_prompt():
    train, val = generate_splits(400, seed=1, val_fraction=0.2)
    assert (len(train), len(val)) == (320, 80)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in val}
    assert not {r["id"] for r in train} & {r["id"] for r in val}
    assert {r["category"] for r in val} == {"calculator", "python_exec", "no_tool"}
    train, val = generate_splits(5, seed=1, val_fraction=0.01)
    assert (len(train), len(val)) == (4, 1)  # a positive fraction always leaves one validation row



def test_a_validation_split_comes_out_of_the_training_rows_and_leaves_the_test_rows_as_they_were():
    two_way_train, two_way_test = generate_splits(200, seed=3, val_fraction=0.1)
    train, validation, test = generate_three_splits(200, 3, test_fraction=0.1, validation_fraction=0.15)
    assert test == two_way_test and (len(train), len(validation), len(test)) == (150, 30, 20)
    prompts = [{r["prompt"] for r in split} for split in (train, validation, test)]
    assert not (prompts[0] & prompts[1] or prompts[0] & prompts[2] or prompts[1] & prompts[2])
    assert sorted(r["id"] for r in train + validation) == sorted(r["id"] for r in two_way_train)
    assert generate_three_splits(200, 3, 0.1, 0.0) == (two_way_train, [], two_way_test)
    assert generate_three_splits(200, 3, 0.1, 0.15) == (train, validation, test)  # deterministic
    assert generate_three_splits(200, 4, 0.1, 0.15)[1] != validation


def test_evaluations_score_the_validation_split_only_when_asked(tmp_path):
    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import build_task

    def prompts(*overrides):
        cfg = compose_run_config(["task=tool_json", "model=tiny_qwen3", "task.data.generate.n=60",
                                  f"paths.cache_dir={tmp_path}", *overrides])
        data = build_task(cfg).build_data(tokenizer=None)
        return [{r["prompt"][-1]["content"] for r in split} for split in (data.train, data.test)]

    train, test = prompts("task.data.generate.validation_fraction=0.2")
    train_again, validation = prompts("task.data.generate.validation_fraction=0.2", "task.data.eval_split=validation")
    assert train == train_again and len(validation) == 12 and len(test) == 6 and len(train) == 42
    assert not validation & test and not validation & train
    assert prompts()[1] == test  # without a validation split: the same test rows, 54 train rows
    for refused in (["task.data.eval_split=validation"],
                    ["task.data.eval_split=validation", "task.data.generate.validation_fraction=0.2",
                     "task.data.train_path=a.json", "task.data.test_path=b.json"]):
        with pytest.raises(Exception, match="data.eval_split=validation"):
            compose_run_config(["task=tool_json", "model=tiny_qwen3", *refused])

def test_large_requests_stay_distinct():
    rows = generate_rows(3000, seed=7)
    assert len({r["prompt"] for r in rows}) == 3000


def test_bad_generator_arguments():
    with pytest.raises(ValueError):
        generate_rows(0, seed=0)
    with pytest.raises(ValueError):
        generate_splits(10, seed=0, val_fraction=1.0)


def test_output_paths():
    assert output_paths("data/tj") == (Path("data/tj/train.json"), Path("data/tj/validation.json"))
    assert output_paths("data/tj.json") == (Path("data/tj.json"), Path("data/tj_validation.json"))


# --------------------------------------------------------------------------------------------- CLI


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ao_calib_tasks.tool_json.generate", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_cli_writes_loadable_deterministic_splits(tmp_path):
    done = _cli("--out", str(tmp_path / "a"), "--n", "60", "--seed", "5", "--val-fraction", "0.25")
    assert done.returncode == 0, done.stderr
    assert "45 train rows" in done.stdout and "15 validation rows" in done.stdout
    train, val = load_rows(tmp_path / "a" / "train.json"), load_rows(tmp_path / "a" / "validation.json")
    assert (len(train), len(val)) == (45, 15)
    assert isinstance(json.loads((tmp_path / "a" / "train.json").read_text()), list)  # a JSON array, as the seed
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in val}
    assert _cli("--out", str(tmp_path / "b.json"), "--n", "60", "--seed", "5", "--val-fraction", "0.25").returncode == 0
    assert (tmp_path / "b.json").read_bytes() == (tmp_path / "a" / "train.json").read_bytes()
    assert (tmp_path / "b_validation.json").read_bytes() == (tmp_path / "a" / "validation.json").read_bytes()
    assert _cli("--out", str(tmp_path / "c"), "--n", "60", "--seed", "5", "--val-fraction", "0.25",
                "--code-quotes", "double").returncode == 0
    plain, quoted = load_rows(tmp_path / "a" / "train.json"), load_rows(tmp_path / "c" / "train.json")
    assert [r["id"] for r in quoted] == [r["id"] for r in plain]
    assert any("'" in r["tool_args"]["code"] for r in plain if r["tool_args"] and "code" in r["tool_args"])
    assert not any("'" in r["tool_args"]["code"] for r in quoted if r["tool_args"] and "code" in r["tool_args"])


def test_cli_rejects_bad_arguments(tmp_path):
    assert _cli("--out", str(tmp_path), "--n", "0").returncode != 0
    assert _cli("--out", str(tmp_path), "--val-fraction", "1.5").returncode != 0
    assert _cli("--n", "5").returncode != 0  # --out is required


# ------------------------------------------------------------------------------------------- loader


def test_loader_accepts_json_array_and_jsonl(tmp_path):
    generated = generate_rows(30, seed=2)
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(generated, indent=2), encoding="utf-8")
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in generated) + "\n\n", encoding="utf-8")
    assert load_rows(array) == generated
    assert load_rows(jsonl) == generated
    extra = [{**generated[0], "difficulty": "easy"}]
    array.write_text(json.dumps(extra), encoding="utf-8")
    assert load_rows(array)[0]["difficulty"] == "easy"  # extra fields are kept


def _good(category: str) -> dict:
    return next(r for r in generate_rows(30, seed=0) if r["category"] == category)


def _edit(kind: str, /, **changes) -> dict:
    return {**_good(kind), **changes}


def _drop(category: str, field: str) -> dict:
    row = _good(category)
    del row[field]
    return row


BAD_ROWS = [
    *[(_drop("calculator", f), f, "missing") for f in FIELDS],
    (_edit("calculator", id=7), "id", "string"),
    (_edit("calculator", source=None), "source", "string"),
    (_edit("calculator", prompt="  "), "prompt", "empty"),
    (_edit("calculator", prompt=["hi"]), "prompt", "string"),
    (_edit("no_tool", expected_answer=14), "expected_answer", "string"),
    (_edit("calculator", category="search"), "category", "one of"),
    (_edit("calculator", tool_needed="yes"), "tool_needed", "boolean"),
    (_edit("calculator", tool="python"), "tool", "calculator"),
    (_edit("calculator", tool=None), "tool", "calculator"),
    (_edit("calculator", tool_needed=False), "tool_needed", "True"),
    (_edit("calculator", tool_args={"code": "print(1)"}), "tool_args", "expression"),
    (_edit("calculator", tool_args={"expression": 14}), "tool_args", "expression"),
    (_edit("calculator", tool_args={"expression": "2+2", "note": "x"}), "tool_args", "expression"),
    (_edit("calculator", tool_args=None), "tool_args", "expression"),
    (_edit("calculator", tool_args={"expression": "__import__('os').getcwd()"}), "tool_args", "evaluate"),
    (_edit("python_exec", tool="calculator"), "tool", "python"),
    (_edit("python_exec", tool_args={"expression": "1+1"}), "tool_args", "code"),
    (_edit("python_exec", tool_args="print(1)"), "tool_args", "code"),
    (_edit("python_exec", tool_args={"code": "def f(:"}), "tool_args", "parse"),
    (_edit("no_tool", tool="calculator"), "tool", "None"),
    (_edit("no_tool", tool_needed=True), "tool_needed", "False"),
    (_edit("no_tool", tool_args={}), "tool_args", "null"),
    (_edit("no_tool", tool_args={"expression": "1"}), "tool_args", "null"),
    ("not an object", None, "JSON object"),
]


@pytest.mark.parametrize("as_jsonl", [False, True], ids=["array", "jsonl"])
@pytest.mark.parametrize("bad,field,reason", BAD_ROWS, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD_ROWS)])
def test_loader_rejects_bad_rows_naming_row_and_field(tmp_path, bad, field, reason, as_jsonl):
    good = generate_rows(2, seed=9)
    path = tmp_path / ("bad.jsonl" if as_jsonl else "bad.json")
    records = [*good, bad]
    path.write_text("\n".join(json.dumps(r) for r in records) if as_jsonl else json.dumps(records), encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_rows(path)
    e = err.value
    assert (e.source, e.row, e.field) == (str(path), 2, field)
    assert "row 2" in str(e) and reason in e.reason
    if field:
        assert f"field '{field}'" in str(e)


def test_loader_rejects_duplicate_ids(tmp_path):
    first, second = generate_rows(2, seed=1)
    path = tmp_path / "dup.json"
    path.write_text(json.dumps([first, {**second, "id": first["id"]}]), encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_rows(path)
    assert (err.value.row, err.value.field) == (1, "id") and "duplicate" in err.value.reason


def test_loader_missing_empty_and_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="tool_json data file not found"):
        load_rows(tmp_path / "nope.json")
    for name, text in [("empty.json", ""), ("blank.jsonl", "\n \n"), ("array.json", "[]")]:
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(DataValidationError) as err:
            load_rows(tmp_path / name)
        assert (err.value.row, err.value.field, err.value.reason) == (0, None, "no rows")
    (tmp_path / "broken.json").write_text('[{"id": ', encoding="utf-8")
    with pytest.raises(DataValidationError, match="not a valid JSON array"):
        load_rows(tmp_path / "broken.json")
    good = json.dumps(generate_rows(1, seed=0)[0])
    (tmp_path / "broken.jsonl").write_text(good + "\n{oops\n", encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_rows(tmp_path / "broken.jsonl")
    assert err.value.row == 1 and "line 2" in err.value.reason


# ------------------------------------------------------------------------------------------ prompts


def test_system_prompt_describes_tools_and_contract():
    for text in ("calculator", "python", '{"final": ', '{"tool": "calculator", "args": {"expression": ',
                 '{"tool": "python", "args": {"code": ', "JSON"):
        assert text in SYSTEM_PROMPT


def test_expected_output_shapes_and_scores(rows):
    seen = set()
    for row in rows[:150]:
        out = expected_output(row)
        obj = json.loads(out)
        assert "\n" not in out and out == json.dumps(obj, ensure_ascii=False)
        if row["category"] == "no_tool":
            assert obj == {"final": row["expected_answer"]}
        else:
            assert list(obj) == ["tool", "args"] and obj["tool"] == row["tool"] and obj["args"] == row["tool_args"]
        seen.add(row["category"])
        scores = score_completion(out, row)
        assert scores["total"] == 2.5 and scores["correct_format"] == scores["correct_tool"] == 1.0
    assert seen == {"calculator", "python_exec", "no_tool"}
    assert expected_output({"category": "calculator", "tool": "calculator", "tool_args": {"expression": "1+1"}}) \
        == '{"tool": "calculator", "args": {"expression": "1+1"}}'
    assert expected_output({"tool": None, "expected_answer": "Paris"}) == '{"final": "Paris"}'
    # the struct form a datasets.Dataset gives mixed tool_args
    assert json.loads(expected_output({"tool": "python", "tool_args": {"code": "print(1)", "expression": None}})) \
        == {"tool": "python", "args": {"code": "print(1)"}}
    with pytest.raises(ValueError):
        expected_output({"tool": "python", "tool_args": None})


def test_messages():
    row = _good("no_tool")
    assert messages(row) == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": row["prompt"]}]


@pytest.mark.parametrize("code, double, single", [
    ("print('hello'[::-1])", 'print("hello"[::-1])', "print('hello'[::-1])"),
    ("print(\"_\".join(['a', 'b']))  # 'kept'", 'print("_".join(["a", "b"]))  # \'kept\'',
     "print('_'.join(['a', 'b']))  # 'kept'"),
    ("x = 'it\\'s'\nprint(x, \"ok\")", 'x = "it\'s"\nprint(x, "ok")', "x = 'it\\'s'\nprint(x, 'ok')"),
    ("print('say \"hi\"', 'a\\\\b')", 'print("say \\"hi\\"", "a\\\\b")', "print('say \"hi\"', 'a\\\\b')"),
    ("print('a\\tb\\x00', \"\\n\")", "print(\"a\\tb\\x00\", \"\\n\")", "print('a\\tb\\x00', '\\n')"),
    # a form feed ends no line for tokenize (str.splitlines would split there and misplace every later literal)
    ("x = 1\x0c\nprint('a', \"b\")", "x = 1\x0c\nprint(\"a\", \"b\")", "x = 1\x0c\nprint('a', 'b')"),
    # triple-quoted and prefixed literals stay as they were
    ("print('''a'b''', f'{1}', b\"x\")", "print('''a'b''', f'{1}', b\"x\")", "print('''a'b''', f'{1}', b\"x\")"),
])
def test_requoting_rewrites_only_the_quotes(code, double, single):
    import ast

    from ao_calib_tasks.tool_json.quoting import requote_strings
    assert requote_strings(code, "double") == double and requote_strings(code, "single") == single
    assert requote_strings(code, "repr") == code
    for rewritten in (double, single):
        assert ast.dump(ast.parse(rewritten)) == ast.dump(ast.parse(code))
    with pytest.raises(ValueError, match="quote style"):
        requote_strings(code, "backtick")


@pytest.mark.parametrize("style, other", [("double", "'"), ("single", '"')])
def test_requoted_code_keeps_the_rows_and_splits_and_every_programs_meaning(style, other):
    import ast
    plain = generate_three_splits(400, 5, 0.1, 0.1)
    quoted = generate_three_splits(400, 5, 0.1, 0.1, code_quotes=style)
    changed = 0
    for rows, rows_quoted in zip(plain, quoted):
        assert [r["id"] for r in rows] == [r["id"] for r in rows_quoted]
        for row, row_quoted in zip(rows, rows_quoted):
            if row["category"] != "python_exec":
                assert row_quoted == row
                continue
            code, code_quoted = row["tool_args"]["code"], row_quoted["tool_args"]["code"]
            assert ast.dump(ast.parse(code_quoted)) == ast.dump(ast.parse(code))
            assert other not in code_quoted  # the generator's strings hold no quote of their own
            changed += code_quoted != code
            assert {**row_quoted, "tool_args": row["tool_args"]} == row
            # the SFT target shows the JSON escape exactly where the code holds a double quote
            assert ('\\"' in expected_output(row_quoted)) == ('"' in code_quoted)
    assert changed > 10  # single: only the templates' few double-quoted literals change
    assert generate_three_splits(400, 5, 0.1, 0.1, code_quotes="repr") == plain


@pytest.mark.parametrize("style", ["double", "single"])
def test_the_task_trains_on_requoted_code_when_asked(tmp_path, style):
    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import build_task

    def targets(*overrides):
        cfg = compose_run_config(["task=tool_json", "model=tiny_qwen3", "task.data.generate.n=200",
                                  f"paths.cache_dir={tmp_path}", *overrides])
        data = build_task(cfg).build_data(tokenizer=None)
        return [row["completion"] for row in data.train if '"python"' in row["completion"]]

    plain, quoted = targets(), targets(f"task.data.generate.code_quotes={style}")
    assert len(plain) == len(quoted) > 20
    escapes = [t.count('\\"') for t in quoted]
    if style == "double":
        assert sum(escapes) > sum(t.count('\\"') for t in plain) + 10 and not any("'" in t for t in quoted)
    else:
        assert sum(escapes) == 0 and any("'" in t for t in quoted)
    with pytest.raises(Exception, match="code_quotes"):
        compose_run_config(["task=tool_json", "task.data.generate.code_quotes=backtick"])
