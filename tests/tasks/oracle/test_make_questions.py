"""ao_calib_tasks.oracle.make_questions through real litellm and real HTTP against the local test server (ao_calib/judges/rule_server.py).

Nothing is mocked: every request goes litellm -> aiohttp -> 127.0.0.1 -> the test server, whose ``rule`` writes a
JSON list of questions derived from the prompt, sometimes wrapped in prose or code fences. Only the parsing and the
plumbing are checked here, not the quality of an LLM's questions.
"""

from __future__ import annotations

import json
import re

import pytest

from ao_calib.judges.requests import PLACEHOLDER_API_KEY
from ao_calib.judges.rule_server import Behaviour, JudgeServer
from ao_calib_tasks.oracle.rows.files import load_wildchat
from ao_calib_tasks.oracle.make_questions import QuestionCache, QuestionWriter, main, make_questions, question_key
from ao_calib_tasks.oracle.question_files import parse_questions, read_prompts
from tests.helpers.commands import run_cli
from tests.helpers.files import read_jsonl

pytestmark = pytest.mark.timeout(60)

MODEL = "openai/question-writer-test"  # not in litellm's price list: cost 0.0
SECRET = "sk-test-DO-NOT-LEAK-0987654321"
MESSAGE = re.compile(r"<message>\n(.*?)\n</message>", re.S)


def questions_for(message: str) -> list[str]:
    """What the fake LLM writes for a message: 3 true yes/no, 3 wrong-topic yes/no, 2 open."""
    topic = message.split()[0].strip(".,!?").lower() if message.split() else "nothing"
    return [f"Is this message about {topic}?", f"Does the user mention {topic}?", "Is the user asking for help?",
            "Is this message about cooking?", "Is the user grieving?", "Is the user angry about sports?",
            "What is the main topic of the message?", f"Why does the user write about {topic}?"]


def rule(prompt_text: str) -> str:
    """Derives the reply from the message in the request; markers in the message pick the wrapping."""
    found = MESSAGE.search(prompt_text)
    message = found.group(1) if found else ""
    qs = questions_for(message)
    if "UNPARSEABLE" in message:
        return "Sorry, I cannot help with that. [citation needed]"
    if "EMPTY" in message:
        return '["", "   "]'
    if "FENCE" in message:
        return "Here are the questions:\n```json\n" + json.dumps(qs, indent=2) + "\n```\nHope this helps!"
    if "PROSE" in message:
        return f"Sure [1]! The list is {json.dumps(qs)} and that is all."
    if "OBJECT" in message:
        return json.dumps({"questions": qs})
    if "DUPES" in message:
        return json.dumps(qs[:2] + [qs[0], qs[0].upper(), "", 7] + qs[2:] + ["Is there an extra one?"] * 3)
    return json.dumps(qs)


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server():
    with JudgeServer(Behaviour(rule=rule)) as s:
        yield s


def opts(server, **kw) -> dict:
    base = dict(model=MODEL, api_base=server.api_base, n_questions=8, max_concurrency=8, timeout_s=2.0,
                max_retries=2, backoff_s=0.01)
    base.update(kw)
    return base


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --------------------------------------------------------------------------------------------- parsing

QS = ["Is it about cats?", "Is the user sad?", "What is the main topic?"]


@pytest.mark.parametrize("text", [
    json.dumps(QS),
    "```json\n" + json.dumps(QS, indent=2) + "\n```",
    "Here you go:\n```\n" + json.dumps(QS) + "\n```\nDone.",
    "Sure [1]! The questions: " + json.dumps(QS) + " -- enjoy. [\"ignored\"]",
    json.dumps({"questions": QS}),
    str(QS),  # a Python-style list with single quotes
    "[\n  " + ",\n  ".join(json.dumps(q) for q in QS) + ",\n]",  # a trailing comma
    json.dumps(["  Is it about cats? ", "", "is it about cats?", 3, "Is the user\nsad?", *QS]),
])
def test_parse_takes_the_first_array_of_strings(text):
    assert parse_questions(text, 8) == QS


@pytest.mark.parametrize("text", [None, "", "No list here.", "[1, 2, 3]", '["", "  "]', "[not json", "{}"])
def test_parse_finds_nothing_in_garbage(text):
    assert parse_questions(text, 8) == []


def test_parse_caps_at_n():
    assert parse_questions(json.dumps([f"Question {i}?" for i in range(20)]), 5) == [f"Question {i}?"
                                                                                     for i in range(5)]


# --------------------------------------------------------------------------------------------- input


def test_read_prompts_txt_jsonl_and_json(tmp_path):
    txt = tmp_path / "p.txt"
    txt.write_text("First prompt.\n\n  Second prompt.  \n")
    rows, bad = read_prompts(txt)
    assert [r.prompt for r in rows] == ["First prompt.", "Second prompt."] and not bad
    assert {r.language for r in rows} == {"unknown"}

    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "A", "language": "french", "id": 7}\n{"wildchat_question": "B"}\nnot json\n'
                     '{"prompt": ""}\n{"lang": "de", "prompt": "C"}\n')
    rows, bad = read_prompts(jsonl)
    assert [(r.index, r.prompt, r.language, r.extra) for r in rows[:2]] == [(0, "A", "french", {"id": 7}),
                                                                          (1, "B", "unknown", {})]
    assert len(bad) == 2 and "row 2" in bad[0] and "row 3" in bad[1]
    rows, _ = read_prompts(jsonl, language_field="lang")
    assert rows[-1].language == "de" and rows[-1].extra == {"lang": "de"}

    js = tmp_path / "p.json"
    js.write_text(json.dumps([{"prompt": "X"}, "Y", 5]))
    rows, bad = read_prompts(js)
    assert [r.prompt for r in rows] == ["X", "Y"] and len(bad) == 1


# --------------------------------------------------------------------------------------------- end to end


def test_questions_in_the_wildchat_format(server, tmp_path):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [
        {"prompt": "Python code keeps crashing, please help", "language": "english", "id": 1},
        {"wildchat_question": "Recette FENCE de crêpes ?", "language": "french", "id": 2},
        {"prompt": "Weather PROSE in Paris tomorrow", "id": 3},
        {"prompt": "Guitar OBJECT chords for a sad song", "id": 4},
        {"prompt": "Taxes DUPES are due soon", "id": 5},
    ])
    out = tmp_path / "out" / "questions.jsonl"
    summary = make_questions(prompts, out, **opts(server))
    assert (summary.prompts, summary.done, summary.failed, summary.cached, summary.calls) == (5, 5, 0, 0, 5)
    assert summary.prompt_tokens > 0 and summary.completion_tokens > 0 and summary.cost_usd == 0.0
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [1, 2, 3, 4, 5]
    assert set(records[0]) == {"wildchat_question", "language", "oracle_questions", "id"}
    assert records[1]["wildchat_question"] == "Recette FENCE de crêpes ?"
    assert [r["language"] for r in records] == ["english", "french", "unknown", "unknown", "unknown"]
    for r in records[:4]:
        assert r["oracle_questions"] == questions_for(r["wildchat_question"])  # as the model returned them
    dupes = records[4]["oracle_questions"]
    assert len(dupes) == 8 and len({q.lower() for q in dupes}) == 8  # de-duplicated and capped at N

    # The request asks for half true, half wrong-topic yes/no questions and a few open ones, as a JSON list.
    request = next(b for b in server.stats.bodies if "Python code" in b["messages"][0]["content"])
    text = request["messages"][0]["content"]
    assert "<message>\nPython code keeps crashing, please help\n</message>" in text
    assert "(language: english)" in text and "JSON list of 8 strings" in text
    assert "3 yes/no questions whose answer is YES" in text and "3 yes/no questions whose answer is NO" in text
    assert "2 open questions" in text and request["model"] == "question-writer-test"
    assert set(server.stats.auth) == {f"Bearer {PLACEHOLDER_API_KEY}"}

    ds = load_wildchat(out, strict=True)
    assert len(ds) == 40
    assert set(ds["question_type"]) == {"binary", "open"}
    assert ds[0]["prompt"] == "Python code keeps crashing, please help" and ds[0]["id"] == 1
    binary = sum(t == "binary" for t in ds["question_type"][:8])
    assert binary == 6


def test_garbage_is_retried_then_the_prompt_is_skipped_and_reported(server, tmp_path):
    server.behaviour.garbage_first = 1  # the first reply has no list: retried
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "Good one"}, {"prompt": "This is UNPARSEABLE"},
                                                 {"prompt": "Only EMPTY strings"}, {"prompt": "Another good one"}])
    out = tmp_path / "q.jsonl"
    summary = make_questions(prompts, out, **opts(server, max_concurrency=1))
    assert (summary.done, summary.failed) == (2, 2)
    assert summary.calls == 2 + 3 + 3 + 1  # good (after one garbage reply), 2 x (1 try + 2 retries), good
    assert summary.garbage == 7 and summary.retries == 5
    assert [r["wildchat_question"] for r in read_jsonl(out)] == ["Good one", "Another good one"]
    assert len(summary.failures) == 2 and summary.failures[0].startswith("row 1 ('This is UNPARSEABLE')")
    assert "after 3 attempts" in summary.failures[0] and "failed: 2" in summary.format()


@pytest.mark.parametrize("status", [500, 503, 429])
def test_transient_errors_are_retried(server, tmp_path, status):
    server.behaviour.fail_first, server.behaviour.error_status = 3, status
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"prompt": f"Prompt number {i}"} for i in range(3)])
    summary = make_questions(prompts, tmp_path / "q.jsonl", **opts(server))
    assert (summary.done, summary.failed, summary.errors, summary.retries, summary.calls) == (3, 0, 3, 3, 6)
    assert server.stats.by_status[status] == 3 and server.stats.by_status[200] == 3


def test_timeouts_are_retried_and_permanent_errors_are_not(server, tmp_path):
    server.behaviour.timeout_first, server.behaviour.hang_s = 1, 3.0
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "Slow one"}])
    summary = make_questions(prompts, tmp_path / "q.jsonl", **opts(server, timeout_s=0.5))
    assert (summary.done, summary.errors, summary.retries) == (1, 1, 1)

    server.behaviour.error_rate, server.behaviour.error_status = 1.0, 401
    summary = make_questions(prompts, tmp_path / "q2.jsonl", **opts(server))
    assert (summary.done, summary.failed, summary.calls) == (0, 1, 1)
    assert "not retried" in summary.failures[0]
    assert read_jsonl(tmp_path / "q2.jsonl") == []


def test_rerun_with_the_cache_makes_no_requests(server, tmp_path):
    cache = tmp_path / "cache"
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"prompt": f"Topic{i} question"} for i in range(6)]
                          + [{"prompt": "UNPARSEABLE thing"}, {"prompt": "Topic0 question"}])
    first = make_questions(prompts, tmp_path / "a.jsonl", **opts(server, cache_dir=cache))
    assert (first.prompts, first.unique, first.done, first.failed) == (8, 7, 7, 1)  # the duplicate asked once
    assert len(QuestionCache(cache)) == 6  # failures are not cached
    server.reset_stats()
    second = make_questions(prompts, tmp_path / "b.jsonl", **opts(server, cache_dir=cache, max_retries=0))
    assert server.stats.total == 1  # only the failed prompt is asked again
    assert (second.cached, second.calls, second.done) == (6, 1, 7)
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()

    server.reset_stats()
    ok = write_jsonl(tmp_path / "ok.jsonl", [{"prompt": f"Topic{i} question"} for i in range(6)])
    third = make_questions(ok, tmp_path / "c.jsonl", **opts(server, cache_dir=cache))
    assert server.stats.total == 0 and (third.cached, third.calls, third.done) == (6, 0, 6)

    # Another N is another request; a corrupt cache file is a miss.
    writer = QuestionWriter(**opts(server, cache_dir=cache, n_questions=4))
    key = question_key(MODEL, writer.render("Topic0 question", "unknown"), 4)
    assert QuestionCache(cache).get(key) is None
    some = question_key(MODEL, QuestionWriter(**opts(server)).render("Topic1 question", "unknown"), 8)
    QuestionCache(cache).path(some).write_text("{truncated")
    fourth = make_questions(ok, tmp_path / "d.jsonl", **opts(server, cache_dir=cache))
    assert (fourth.cached, fourth.calls) == (5, 1)


def test_concurrency_is_bounded(server, tmp_path):
    server.behaviour.latency_s = 0.15
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"prompt": f"Prompt {i}"} for i in range(12)])
    summary = make_questions(prompts, tmp_path / "q.jsonl", **opts(server, max_concurrency=3))
    assert summary.done == 12 and server.stats.total == 12
    assert 2 <= server.stats.max_in_flight <= 3  # bounded (and really concurrent)


def test_cli_txt_input_rerun_and_errors(server, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Knitting a scarf for my grandmother\n\nMy FENCE is broken and I am furious\n"
                       "Can you explain UNPARSEABLE quantum physics?\n")
    out, cache = tmp_path / "q.jsonl", tmp_path / "cache"
    args = ["--prompts", str(prompts), "--out", str(out), "--n-questions", "6", "--model", MODEL,
            "--api-base", server.api_base, "--max-concurrency", "4", "--timeout-s", "5", "--max-retries", "1",
            "--backoff-s", "0.01", "--cache-dir", str(cache)]
    proc = run_cli("ao_calib_tasks.oracle.make_questions", *args, timeout=60, env={"OPENAI_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    assert "prompts: 3 (3 distinct), done: 2, cached: 0, failed: 1" in proc.stdout
    assert "calls: 4" in proc.stdout and "tokens:" in proc.stdout and "cost: $0.0000" in proc.stdout
    assert "row 2 ('Can you explain UNPARSEABLE quantum physics?')" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr
    assert set(server.stats.auth) == {f"Bearer {SECRET}"}  # the key comes from the environment only
    records = read_jsonl(out)
    assert [r["oracle_questions"] for r in records] == [questions_for(r["wildchat_question"])[:6]
                                                        for r in records]
    assert len(load_wildchat(out, strict=True)) == 12

    # A rerun (in-process, same CLI) makes no request for the prompts already done.
    server.reset_stats()
    summary_json = tmp_path / "summary.json"
    assert main([*args, "--max-retries", "0", "--summary-json", str(summary_json)]) == 0
    assert server.stats.total == 1  # the failed one only
    assert "cached: 2" in capsys.readouterr().out
    assert json.loads(summary_json.read_text())["cached"] == 2

    prompts.write_text("Only UNPARSEABLE here\n")
    assert main([*args[:2], "--out", str(tmp_path / "bad.jsonl"), *args[4:], "--max-retries", "0"]) == 1
    missing = run_cli("ao_calib_tasks.oracle.make_questions", "--prompts", str(tmp_path / "nope.txt"), "--out",
                      str(out), timeout=60)
    assert missing.returncode == 2 and "prompts file not found" in missing.stderr
