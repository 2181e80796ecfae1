"""BFCL files in: question + possible_answer loading, validation errors, prompts, and task.data.format=bfcl."""

import json
import random
from pathlib import Path

import pytest

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError, DataValidationError
from ao_calib.task_api import build_task
from ao_calib_tasks.function_call import bfcl
from ao_calib_tasks.function_call.bfcl_checker import score_text
from ao_calib_tasks.function_call.generate import make_row
from ao_calib_tasks.function_call.parsing import parse_calls

FIXTURE = Path(__file__).parents[2] / "data" / "bfcl"


def test_fixture_folder_loads_every_category_with_its_ground_truth():
    cases = bfcl.load_cases(FIXTURE)
    counts = {c: sum(case["category"] == c for case in cases) for c in
              ("simple_python", "multiple", "parallel", "parallel_multiple")}
    assert counts == {"simple_python": 12, "multiple": 8, "parallel": 8, "parallel_multiple": 8}
    for case in cases:
        reference = bfcl.reference_call_text(case["ground_truth"])
        assert score_text(reference, case["function"], case["ground_truth"]).valid, case["id"]
        assert len(parse_calls(reference)) == len(case["ground_truth"])  # the legacy parser reads it too


def test_prompt_puts_function_docs_in_the_system_turn():
    case = bfcl.load_question_file(FIXTURE / "BFCL_v4_parallel.json")[0]
    messages = bfcl.prompt_messages(case)
    assert messages[0]["role"] == "system" and json.dumps(case["function"], indent=4) in messages[0]["content"]
    assert "[func_name1(param_name1=value1" in messages[0]["content"]
    assert messages[1:] == case["question"][0]


def _docs_of(system_turn: str) -> list:
    return json.loads(system_turn.split("The functions you may call, in JSON:\n", 1)[1])


def test_compact_docs_are_the_same_docs_on_one_line_for_training_and_every_held_out_set(tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    for name in ("BFCL_v4_multiple.json", "possible_answer"):
        (extra / name).symlink_to(FIXTURE / name)
    base = ["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl", "task.data.generate.n_train=4",
            "task.data.generate.n_test=4", f"task.data.extra_test_path={extra}"]
    by_style = {}
    for style in ("indented", "compact"):
        task = build_task(compose_run_config([*base, f"task.data.bfcl_docs={style}"]))
        data = task.build_data(tokenizer=None)
        by_style[style] = [r["prompt"][0]["content"] for r in [*data.train, *data.test, *task.extra_rows()]]
    assert len(by_style["compact"]) == 4 + 4 + 8
    for indented, compact in zip(by_style["indented"], by_style["compact"]):
        assert _docs_of(compact) == _docs_of(indented)
        assert "\n" not in compact.split("in JSON:\n", 1)[1].strip() and "\n    " in indented
        assert len(compact) < 0.85 * len(indented)
    with pytest.raises(AOCalibError, match="task.data.bfcl_docs"):
        compose_run_config([*base, "task.data.bfcl_docs=pretty"])


def _write(tmp_path, rows, name="BFCL_v4_simple_python.json"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


GOOD = {"id": "simple_python_0", "question": [[{"role": "user", "content": "Area of a 3 by 4 rectangle?"}]],
        "function": [{"name": "area", "description": "", "parameters": {"type": "dict", "properties": {
            "w": {"type": "integer", "description": ""}, "h": {"type": "integer", "description": ""}},
            "required": ["w", "h"]}}],
        "ground_truth": [{"area": {"w": [3], "h": [4]}}]}


def test_signature_docs_are_one_line_a_function_with_types_defaults_and_what_it_does():
    doc = {"name": "wc", "description": "This tool belongs to a file system. Tool description: Count the lines of a "
           "file. Use it often.", "parameters": {"type": "dict", "required": ["file_name"], "properties": {
               "mode": {"type": "string", "default": "l"}, "depth": {"type": "integer"},
               "file_name": {"type": "string"}, "numbers": {"type": "array", "items": {"type": "float"}}}}}
    assert bfcl.signature(doc) == ("wc(file_name: str, mode: str = 'l', depth: int = ..., numbers: list[float] = ...):"
                                   " Count the lines of a file.")
    prompt = bfcl.system_prompt([doc, {"name": "pwd", "description": "Where you are."}], "signatures")
    assert prompt.endswith("one a line:\n" + bfcl.signature(doc) + "\npwd(): Where you are.\n")


@pytest.mark.parametrize("change,field,needle", [
    ({"question": "hi"}, "question", "one turn"),
    ({"function": [{"name": "area", "parameters": {"properties": {"w": {"type": "number"}}}}]}, "function",
     "'number'"),
    ({"ground_truth": [{"volume": {"w": [3]}}]}, "ground_truth", "'volume' is not among"),
    ({"ground_truth": [{"area": {"w": 3}}]}, "ground_truth", "list of acceptable values"),
    ({"id": "simple_java_0"}, "id", "only Python"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, change, field, needle):
    path = _write(tmp_path, [GOOD, {**GOOD, **change}])
    with pytest.raises(DataValidationError) as err:
        bfcl.load_question_file(path)
    message = str(err.value)
    assert str(path) in message and "line 2" in message and field in message and needle in message


def test_missing_possible_answer_is_named(tmp_path):
    row = {k: v for k, v in GOOD.items() if k != "ground_truth"}
    path = _write(tmp_path, [row])
    with pytest.raises(FileNotFoundError, match="possible_answer"):
        bfcl.load_question_file(path)
    (tmp_path / "possible_answer").mkdir()
    _write(tmp_path / "possible_answer", [{"id": "simple_python_0", "ground_truth": GOOD["ground_truth"]}])
    assert bfcl.load_question_file(path)[0]["ground_truth"] == GOOD["ground_truth"]


def test_missing_or_empty_files_are_config_errors_naming_the_file(tmp_path):
    # AOCalibError: the run's CLI prints one line and exits 2; still a FileNotFoundError for callers that fall back
    for path, needle in [(tmp_path / "BFCL_v4_simple.json", "BFCL file not found"),
                         (tmp_path / "empty", "no BFCL question file")]:
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(AOCalibError, match=needle) as err:
            bfcl.load_cases(path)
        assert isinstance(err.value, FileNotFoundError) and str(path) in str(err.value)
    blank = _write(tmp_path, [])
    with pytest.raises(DataValidationError, match="no rows"):
        bfcl.load_question_file(blank)


def test_generated_cases_are_valid_bfcl_cases():
    cases = bfcl.generated_cases(40, seed=0, tag="train", distractors=1)
    assert {c["category"] for c in cases} >= {"multiple", "parallel_multiple"}
    _assert_valid_with_passing_references(cases)


def test_generated_optional_parameters_follow_bfcl_defaults():
    """As in real BFCL: a doc states an optional parameter's default; unstated, the parameter may be omitted or given
    that default, never another value; the reference (the SFT target) omits it; a value the query states is kept."""
    from ao_calib_tasks.function_call.generate import format_call
    from ao_calib_tasks.function_call.schemas import BY_NAME

    cases = bfcl.generated_cases(300, seed=0, tag="train", distractors=1)
    seen = {"unstated": 0, "stated": 0, "no_default": 0}
    for case in cases:
        docs = {f["name"]: f for f in case["function"]}
        for i, expected in enumerate(case["ground_truth"]):
            (name, params), = expected.items()
            calls = parse_calls(bfcl.reference_call_text(case["ground_truth"]))
            reference = calls[i]
            for param, options in params.items():
                spec = BY_NAME[name].parameters[param]
                if not spec.optional:
                    continue
                described = docs[name]["parameters"]["properties"][param]["description"]
                if spec.default is None:
                    seen["no_default"] += options == [""]
                    assert "Default is" not in described
                    continue
                assert described.endswith(f"Default is {bfcl._default_text(spec.default)}."), described
                if options[0] == "":
                    seen["unstated"] += 1
                    assert options == ["", spec.default] and param not in reference.kwargs
                    for value, right in ((spec.default, True), (_another_value(spec), False)):
                        args = [dict(c.kwargs) for c in calls]
                        args[i][param] = value
                        text = "[" + ", ".join(format_call(c.name, a) for c, a in zip(calls, args)) + "]"
                        assert score_text(text, case["function"], case["ground_truth"]).valid is right, text
                else:
                    seen["stated"] += 1
                    assert reference.kwargs[param] == options[0]
                    assert options == ([options[0], ""] if options[0] == spec.default else [options[0]])
    assert min(seen.values()) >= 5, seen


def _another_value(spec):
    """A value of the parameter's type other than its default."""
    if isinstance(spec.default, bool):
        return not spec.default
    if isinstance(spec.default, str):
        return spec.default + "x"
    return spec.default + 1


def test_task_reads_bfcl_files_and_scores_per_category(tmp_path):
    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                              f"task.data.train_path={FIXTURE / 'BFCL_v4_simple_python.json'}",
                              f"task.data.test_path={FIXTURE / 'BFCL_v4_parallel.json'}"])
    task = build_task(cfg)
    data = task.build_data(tokenizer=None)
    assert len(data.train) == 12 and len(data.test) == 8 and task.headline_metric == "bfcl_ast"
    row = data.test[0]
    rewards = task.reward_functions(data)
    good, bad = row["answer"], "Sure: " + row["answer"]
    assert rewards["bfcl_ast"]([good, bad], bfcl_functions=[row["bfcl_functions"]] * 2,
                               bfcl_ground_truth=[row["bfcl_ground_truth"]] * 2) == [1.0, 0.0]
    assert task.score_one(good, row)["bfcl_ast"] == 1.0
    records = [{"kind": r["kind"], "completion": r["answer"], "scores": task.score_one(r["answer"], r)}
               for r in data.test.to_list()]
    metrics = task.aggregate(records, None, "t")
    assert metrics["ast_accuracy/parallel"] == 1.0 and metrics["empty_where_call_needed"] == 0.0
    # an empty answer and [] count as empty where a call is needed; on an irrelevance case they are the answer
    records[0]["completion"], records[1]["completion"] = "", " [] "
    records.append({"kind": "irrelevance", "completion": "[]", "scores": dict.fromkeys(records[0]["scores"], 1.0)})
    assert task.aggregate(records, None, "t")["empty_where_call_needed"] == 2 / 8


def test_lenient_format_is_a_switch(tmp_path):
    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                              "task.strict_format=false", "task.data.generate.n_train=4",
                              "task.data.generate.n_test=2"])
    task = build_task(cfg)
    row = task.build_data(tokenizer=None).test[0]
    assert task.score_one("Here you go:\n```python\n" + row["answer"] + "\n```", row)["bfcl_ast"] == 1.0


def test_generated_cases_without_distractors_show_only_the_called_functions():
    with_one = bfcl.generated_cases(40, seed=0, tag="train", distractors=1)
    bare = bfcl.generated_cases(40, seed=0, tag="train", distractors=0)
    assert bare[0]["ground_truth"] == with_one[0]["ground_truth"]  # the same first draw, fewer docs
    assert {c["category"] for c in bare} <= {"simple", "parallel", "parallel_multiple"}
    assert "simple" in {c["category"] for c in bare}
    for case in bare:
        assert {f["name"] for f in case["function"]} == {next(iter(t)) for t in case["ground_truth"]}
    with pytest.raises(Exception, match="bfcl_distractors"):
        build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                                       "task.data.generate.bfcl_distractors=-1"]))


def test_irrelevance_cases_load_without_a_possible_answer_file_and_expect_no_call(tmp_path):
    """BFCL ships no possible_answer file for its irrelevance category: the loader reads one without, its
    ground truth the empty list, and the scorer counts no call (`[]`, text) as right and any call as wrong."""
    case = {**GOOD, "id": "irrelevance_3"}
    case.pop("ground_truth", None)
    (tmp_path / "BFCL_v4_irrelevance.json").write_text(json.dumps(case) + "\n")
    (loaded,) = bfcl.load_cases(tmp_path)
    assert loaded["category"] == "irrelevance" and loaded["ground_truth"] == []
    for text, right in (("[]", True), ("I cannot answer that with these functions.", True),
                        (bfcl.reference_call_text(GOOD["ground_truth"]), False)):
        assert score_text(text, loaded["function"], []).valid is right, text
    with pytest.raises(DataValidationError, match="expects no call"):
        bfcl.validate_case({**case, "ground_truth": GOOD["ground_truth"]}, "f", 0, 1)


def test_generated_irrelevance_cases_leave_the_other_cases_unchanged():
    plain = bfcl.generated_cases(100, seed=3, tag="train", distractors=1)
    mixed = bfcl.generated_cases(100, seed=3, tag="train", distractors=1, irrelevance=0.3)
    irrelevant = [c for c in mixed if c["category"] == "irrelevance"]
    assert 15 <= len(irrelevant) <= 45
    for case in irrelevant:
        bfcl.validate_case(case, "generated", 0, 0)
        i = int(case["id"].removeprefix("irrelevance_train"))
        needed = {next(iter(t)) for t in plain[i]["ground_truth"]}
        assert case["ground_truth"] == [] and not needed & {f["name"] for f in case["function"]}
        assert case["question"] == plain[i]["question"]  # the same query, shown only functions it does not need
    assert [c for c in mixed if c["category"] != "irrelevance"] == \
        [p for p, m in zip(plain, mixed) if m["category"] != "irrelevance"]
    with pytest.raises(Exception, match="bfcl_irrelevance"):
        build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                                       "task.data.generate.bfcl_irrelevance=1.5"]))


@pytest.mark.parametrize("synthetic", [0.0, 0.5])
def test_near_miss_irrelevance_cases_show_a_function_that_shares_a_verb_or_a_parameter(synthetic):
    from ao_calib_tasks.function_call.schemas import BY_NAME
    from ao_calib_tasks.function_call.synthetic import synthetic_functions

    by_name = {**BY_NAME, **{s.name: s for s in synthetic_functions(bfcl.SYNTHETIC_POOL, 3)}}
    plain = bfcl.generated_cases(200, seed=3, tag="train", distractors=1, synthetic=synthetic)
    random_docs = bfcl.generated_cases(200, seed=3, tag="train", distractors=1, irrelevance=0.3, synthetic=synthetic)
    near = bfcl.generated_cases(200, seed=3, tag="train", distractors=1, irrelevance=0.3, synthetic=synthetic,
                                near_miss=1.0)
    assert bfcl.generated_cases(200, seed=3, tag="train", distractors=1, irrelevance=0.3, synthetic=synthetic,
                                near_miss=0.0) == random_docs
    # only the irrelevance cases' docs change: the same cases are irrelevance cases, with the same queries
    assert [c for c in near if c["category"] != "irrelevance"] == \
        [c for c in random_docs if c["category"] != "irrelevance"]
    assert [c["question"] for c in near if c["category"] == "irrelevance"] == \
        [c["question"] for c in random_docs if c["category"] == "irrelevance"]
    close = 0
    for case, other in zip(near, random_docs):
        if case["category"] != "irrelevance":
            continue
        bfcl.validate_case(case, "generated", 0, 0)
        needed = {next(iter(t)) for t in plain[int(case["id"].removeprefix("irrelevance_train"))]["ground_truth"]}
        shown = [f["name"] for f in case["function"]]
        assert case["ground_truth"] == [] and not needed & set(shown) and len(shown) == len(other["function"])
        verbs = {bfcl._verb(n) for n in needed}
        params = {p for n in needed for p in by_name[n].parameters}
        close += bfcl._verb(shown[0]) in verbs or bool(params & set(by_name[shown[0]].parameters))
    n = sum(c["category"] == "irrelevance" for c in near)
    assert n >= 40 and close >= 0.8 * n  # a query with no near miss in its library keeps a random doc
    randomly = sum(bfcl._verb(o["function"][0]["name"]) in {bfcl._verb(next(iter(t))) for t in p["ground_truth"]}
                   for o, p in zip(random_docs, plain) if o["category"] == "irrelevance")
    assert randomly < close / 2
    for refused in ("task.data.generate.bfcl_near_miss=1.5", "task.data.generate.bfcl_near_miss=0.5"):
        with pytest.raises(Exception, match="bfcl_near_miss"):  # out of range; without irrelevance cases
            build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                                           refused]))


def _assert_valid_with_passing_references(cases: list[dict]) -> None:
    """Every case is valid BFCL input and its reference call passes BFCL's check."""
    for case in cases:
        bfcl.validate_case(case, "generated", 0, 0)
        assert score_text(bfcl.reference_call_text(case["ground_truth"]), case["function"],
                          case["ground_truth"]).valid, case


def _assert_made_up_share_refused(key: str, **share: float) -> None:
    """A share of made-up functions' parallel queries (``key``): make_row refuses it without the draws that apply it
    (``<share>_rng``), and the run refuses it by key out of range and without made-up functions."""
    with pytest.raises(ValueError, match=f"{next(iter(share))}_rng"):
        make_row(random.Random(0), **share)
    for refused in (f"task.data.generate.{key}=-0.1", f"task.data.generate.{key}=0.5"):
        with pytest.raises(Exception, match=key):
            build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                                           refused]))


def _as_written(value) -> str:
    """A value as the generator writes it in a query (a whole float without its ".0")."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _training_cases_without_and_with(seed: int, irrelevance: float, **share: float) -> tuple[list, list]:
    """300 generated training cases (half on made-up functions) without and with one generator share set; the share
    at 0 must give the cases made before the option existed."""
    common = {"seed": seed, "tag": "train", "distractors": 1, "irrelevance": irrelevance, "synthetic": 0.5}
    plain = bfcl.generated_cases(300, **common)
    assert bfcl.generated_cases(300, **common, **dict.fromkeys(share, 0.0)) == plain
    return plain, bfcl.generated_cases(300, **common, **share)


def test_context_sentences_lengthen_queries_without_changing_any_answer():
    """generate.bfcl_context: a share of the cases (irrelevance cases alike) get sentences of context around the same
    request; functions, references and categories stay those of the bare cases, and with 0 nothing changes."""
    from ao_calib_tasks.function_call.generate import CONTEXT_CLOSINGS, CONTEXT_LEADS

    plain, half = _training_cases_without_and_with(seed=5, irrelevance=0.2, context=0.5)
    changed = {"irrelevance": 0, "call": 0}
    quoted = closed = 0
    for case, bare in zip(half, plain):
        query, request = case["question"][0][0]["content"], bare["question"][0][0]["content"]
        assert {k: v for k, v in case.items() if k != "question"} == {k: v for k, v in bare.items() if k != "question"}
        if query == request:
            continue
        changed["irrelevance" if case["category"] == "irrelevance" else "call"] += 1
        wrapped = query.startswith('"')  # a query with context starts with a lead sentence, or a quote around it
        quoted += wrapped
        inner = query[1:-1] if wrapped else query
        assert request in inner and inner.index(request) > 0, (query, request)  # the request, after its context
        lead, after = inner[:inner.index(request)], inner[inner.index(request) + len(request):].strip()
        assert sum(s in lead for s in CONTEXT_LEADS) in (1, 2), query
        assert after in ("", *CONTEXT_CLOSINGS), query
        closed += bool(after)
    n_irrelevant = sum(c["category"] == "irrelevance" for c in plain)
    # about half of each kind: the context says nothing about whether a call is needed
    assert 0.3 * n_irrelevant <= changed["irrelevance"] <= 0.7 * n_irrelevant, changed
    assert 0.4 * (300 - n_irrelevant) <= changed["call"] <= 0.6 * (300 - n_irrelevant), changed
    assert quoted >= 5 and closed >= 20, (quoted, closed)
    with pytest.raises(Exception, match="bfcl_context"):  # out of range
        build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                                       "task.data.generate.bfcl_context=1.5"]))


def test_parallel_queries_can_give_every_call_its_own_arguments_in_call_order():
    """generate.bfcl_parallel_each: made-up functions' parallel queries draw every argument anew per call, written
    one clause a call or "..., respectively"; the values of each argument appear in call order, and the reference
    passes BFCL's check. With 0 the cases are the ones made before the option existed."""
    _, each = _training_cases_without_and_with(seed=7, irrelevance=0.1, parallel_each=1.0)
    styles = {"; and ": 0, ", respectively": 0}
    _assert_valid_with_passing_references(each)
    for case in each:
        query = case["question"][0][0]["content"]
        style = next((k for k in styles if k in query), None)
        if case["category"] != "parallel" or style is None:
            continue
        styles[style] += 1
        calls = [next(iter(c.values())) for c in case["ground_truth"]]
        varied = [p for p in calls[0] if len({repr(c[p][0]) for c in calls}) > 1]
        for p in varied:
            values = [c[p][0] for c in calls]
            if all(isinstance(v, str) for v in values) and len(set(values)) == len(values):
                positions = [query.index(v) for v in values]
                assert positions == sorted(positions), (p, values, query)
    assert min(styles.values()) >= 5, styles
    parallel_args = [len(next(iter(c["ground_truth"][0].values()))) for c in each if c["category"] == "parallel"]
    assert max(parallel_args) >= 2
    _assert_made_up_share_refused("bfcl_parallel_each", each=0.5)


def test_parallel_queries_can_be_told_one_sentence_a_call():
    """generate.bfcl_parallel_story: made-up functions' parallel queries told as a short story, the request and then
    one sentence a call, or an opening line, the calls and the request; the n-th sentence holds the n-th call's
    values, and the reference passes BFCL's check. With 0 the cases are the ones made before the option existed."""
    from ao_calib_tasks.function_call.generate import ORDINALS, STORY_INTROS

    _, story = _training_cases_without_and_with(seed=9, irrelevance=0.1, parallel_story=1.0)
    told = {"request first": 0, "request last": 0}
    _assert_valid_with_passing_references(story)
    for case in story:
        query = case["question"][0][0]["content"]
        if case["category"] != "parallel" or f" {ORDINALS[1]} " not in query:
            continue
        sentences = [s for s in query.split(". ") if any(f" {word}" in s for word in ORDINALS)]
        calls = [next(iter(c.values())) for c in case["ground_truth"]]
        assert len(sentences) == len(calls), query
        for sentence, call, word in zip(sentences, calls, ORDINALS):
            assert f" {word}" in sentence, (sentence, query)
            for options in call.values():
                if options[0] != "":  # an omitted optional parameter
                    assert _as_written(options[0]) in sentence, (options[0], sentence, query)
        opening = any(query.startswith(intro.split("{n}")[0]) for intro in STORY_INTROS)
        told["request last" if opening else "request first"] += 1
    assert min(told.values()) >= 5, told
    _assert_made_up_share_refused("bfcl_parallel_story", story=0.5)


def test_made_up_functions_give_valid_cases_whose_values_are_all_in_the_query():
    """generate.bfcl_synthetic: a share of the training cases call made-up functions (distinct names, some
    namespaced); each case's reference answer passes BFCL's check, every value the answer holds is written in the
    query; with a share of 0 the cases are the ones the library alone always gave."""
    from ao_calib_tasks.function_call.schemas import BY_NAME
    from ao_calib_tasks.function_call.synthetic import synthetic_functions

    pool = synthetic_functions(bfcl.SYNTHETIC_POOL, seed=5)
    names = [f.name for f in pool]
    assert len(set(names)) == len(names) == bfcl.SYNTHETIC_POOL and not set(names) & set(BY_NAME)
    # one function per verb and object: the query's words name one function, whatever its namespace
    assert len({n.rsplit(".", 1)[-1] for n in names}) == len(names)
    assert any("." in n for n in names) and any("." not in n for n in names)
    assert [f.name for f in synthetic_functions(20, seed=5)] != [f.name for f in synthetic_functions(20, seed=6)]
    mixed = bfcl.generated_cases(120, seed=5, tag="train", distractors=1, irrelevance=0.1, synthetic=0.5)
    made_up = [c for c in mixed if {f["name"] for f in c["function"]} & set(names)]
    assert 35 <= len(made_up) <= 85
    assert {c["category"] for c in made_up} >= {"multiple", "parallel", "parallel_multiple", "irrelevance"}
    _assert_valid_with_passing_references(mixed)
    for case in made_up:  # made-up functions take no booleans: every value is written as it is
        query = case["question"][0][0]["content"]
        for call in case["ground_truth"]:
            for options in next(iter(call.values())).values():
                values = options[0] if isinstance(options[0], list) else [options[0]]
                for value in values:
                    if value != "":  # an omitted optional parameter
                        assert _as_written(value) in query, (value, query)
    assert any(not {f["name"] for f in c["function"]} & set(names) for c in mixed)
    assert bfcl.generated_cases(40, seed=5, tag="train", distractors=1, synthetic=0.0) == \
        bfcl.generated_cases(40, seed=5, tag="train", distractors=1)
    with pytest.raises(Exception, match="bfcl_synthetic"):
        build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                                       "task.data.generate.bfcl_synthetic=2"]))


def test_a_test_path_alone_replaces_only_the_generated_held_out_split():
    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                              "task.data.generate.n_train=6", f"task.data.test_path={FIXTURE}"])
    data = build_task(cfg).build_data(tokenizer=None)
    assert len(data.train) == 6 and all(r["id"].endswith(f"train{i}") for i, r in enumerate(data.train))
    assert len(data.test) == 36


def test_the_validation_split_is_a_third_generated_split_and_scores_its_own_extra_set(tmp_path):
    """task.data.eval_split=validation: every evaluation scores generated cases apart from train and test (same
    generator settings); the extra held-out set (real BFCL test cases) is not looked at while choosing settings,
    and extra_validation_path (other real cases) is scored in its place."""
    base = ["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl", "task.data.generate.n_train=6",
            "task.data.generate.n_test=8", f"task.data.extra_test_path={FIXTURE}"]
    test = build_task(compose_run_config(base)).build_data(tokenizer=None)
    task = build_task(compose_run_config([*base, "task.data.eval_split=validation"]))
    validation = task.build_data(tokenizer=None)
    assert validation.train["id"] == test.train["id"] and len(validation.test) == 8
    assert not set(validation.test["id"]) & (set(test.test["id"]) | set(test.train["id"]))
    assert validation.test["prompt"] != test.test["prompt"]
    assert task.extra_evaluations(None, None, lambda rows, **_: [""] * len(rows), None, "final", validation) == {}

    from ao_calib.runs.run_dir import RunDir

    other = tmp_path / "validation_cases"  # one category of the fixture stands in for a disjoint real folder
    (other / "possible_answer").mkdir(parents=True)
    (tmp_path / "run").mkdir()
    (tmp_path / "t").mkdir()
    name = "BFCL_v4_parallel.json"
    (other / name).write_text((FIXTURE / name).read_text())
    (other / "possible_answer" / name).write_text((FIXTURE / "possible_answer" / name).read_text())
    task = build_task(compose_run_config([*base, "task.data.eval_split=validation",
                                          f"task.data.extra_validation_path={other}"]))
    seen = []
    extra = task.extra_evaluations(None, None, lambda rows, **_: seen.extend(rows) or [""] * len(rows),
                                   RunDir(tmp_path / "run"), "final", validation)["extra_test"]
    assert extra["path"] == str(other) and extra["split"] == "validation"
    assert seen and {r["kind"] for r in seen} == {"parallel"} and extra["num_samples"] == len(seen)
    test_run = build_task(compose_run_config([*base, f"task.data.extra_validation_path={other}"]))
    assert test_run.extra_evaluations(None, None, lambda rows, **_: [""] * len(rows), RunDir(tmp_path / "t"),
                                      "final", test)["extra_test"]["path"] == str(FIXTURE)
    with pytest.raises(Exception, match="eval_split=validation"):
        compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.eval_split=validation"])


def test_an_extra_test_set_is_scored_per_category_at_every_evaluation(tmp_path):
    from ao_calib.reporting.summary import evaluation_rows
    from ao_calib.runs.run_dir import RunDir

    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
                              "task.data.generate.n_train=4", "task.data.generate.n_test=2",
                              f"task.data.extra_test_path={FIXTURE}", "task.data.extra_test_samples=20"])
    task = build_task(cfg)
    run = RunDir(tmp_path)

    def generate(rows, condition="own", desc=""):  # what a model that answers every case right would write
        return [r["answer"] if i % 2 == 0 else "no call" for i, r in enumerate(rows)]

    extra = task.extra_evaluations(None, None, generate, run, "final", task.build_data(tokenizer=None))["extra_test"]
    assert extra["num_samples"] == 20 and extra["path"] == str(FIXTURE)
    rows = read_jsonl_file(run.predictions("final", "extra"))
    assert len(rows) == 20 and extra["metrics"]["bfcl_ast"] == 0.5
    assert len({r["kind"] for r in rows}) == 4  # a seeded sample over the folder, not its first file's rows
    for category in {r["kind"] for r in rows}:
        expected = [r["scores"]["bfcl_ast"] for r in rows if r["kind"] == category]
        assert extra["metrics"][f"ast_accuracy/{category}"] == sum(expected) / len(expected)
    (tmp_path / "eval.json").write_text(json.dumps({"tag": "final", "metrics": {"accuracy": 0.1},
                                                    "extra_test": extra}))
    assert [tag for tag, _ in evaluation_rows(run)] == ["final", "final (extra test)"]
    with pytest.raises(Exception, match="extra_test_samples"):
        build_task(compose_run_config(["task=function_call", "model=tiny_qwen3",
                                       "task.data.extra_test_samples=0"]))


def read_jsonl_file(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
