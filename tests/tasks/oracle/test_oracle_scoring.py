"""How task=oracle scores an answer (``checked_against_reference``): a yes/no reference by the yes/no the answer opens
with; an open reference, or none, by the judge's informativeness, never by comparing texts."""

from __future__ import annotations

import re

import pytest

from ao_calib.config.compose import compose_run_config
from ao_calib.judges.rule_server import Behaviour, JudgeServer
from ao_calib.task_api import TaskData, build_task, with_run_judge
from ao_calib_tasks.oracle.rows.oracle import checked_against_reference

TEXT = "I feel positive today: the sun is out over Rome."


def text_rule(prompt_text: str) -> str:
    """A judge that reads the text: an answer found in it scores 90, any other 10."""
    text = re.search(r"<<<\n(.*?)\n>>>", prompt_text, re.S).group(1).lower()
    answer = re.findall(r"^Answer to grade:\s*(.*)$", prompt_text, re.M)[-1].strip().lower()
    return f"SCORE: {90 if answer and answer in text else 10}"


def row(answer: str | None, question: str = "What is the user's mood?") -> dict:
    return {"source_prompt": TEXT, "question": question, "answer": answer, "kind": "mood"}


@pytest.fixture
def judged_task(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with JudgeServer(Behaviour(rule=text_rule)) as server:
        cfg = compose_run_config(["experiment=oracle_tiny", "judge=litellm", "judge.model=openai/test-judge",
                                  f"judge.api_base={server.api_base}", f"judge.cache_dir={tmp_path / 'judge'}",
                                  "judge.backoff_s=0.01"])
        task = build_task(cfg)
        yield task, judged(task), server


def judged(task) -> TaskData:
    """Data with no rows carrying the run's judge, which is all scoring reads."""
    return with_run_judge(task, TaskData(train=None, test=None), model=None, tokenizer=None)


def test_a_yes_no_reference_is_checked_against_the_answers_yes_or_no_without_the_judge(judged_task):
    task, data, server = judged_task
    completions = ["[epistemic status: 80] yes.", "[epistemic status: 80] No", "[epistemic status: 80] positive",
                   "[epistemic status: 80] ", "Yes"]
    scores = task.score(completions, [row("Yes", "Is the user's mood positive?")] * len(completions), data)
    assert [s["correct"] for s in scores] == [1.0, 0.0, 0.0, 0.0, 1.0]  # another word, or none, is wrong
    assert all("informativeness" not in s for s in scores) and server.stats.total == 0
    assert [s["confidence"] for s in scores] == [0.8, 0.8, 0.8, 0.8, None]


def test_an_open_reference_is_scored_by_the_judge_not_by_matching_non_yes_no_answers(judged_task):
    """Reference "positive": on the answer "negative" both are not yes/no, which makes neither the other."""
    task, data, server = judged_task
    completions = ["[epistemic status: 70] negative", "[epistemic status: 70] positive", "[epistemic status: 70] "]
    scores = task.score(completions, [row("positive")] * 3, data)
    assert [s["correct"] for s in scores] == [0.0, 1.0, 0.0]
    assert [s["informativeness"] for s in scores] == [0.1, 0.9, 0.1] and server.stats.total == 3
    assert not checked_against_reference(row("positive")) and not checked_against_reference(row(None))
    assert checked_against_reference(row("No"))
    # a yes/no row and an open one in one evaluation: each is calibrated against its own outcome
    mixed = [{"scores": s, "question": q, "kind": "mood"} for s, q in zip(
        task.score(["[epistemic status: 70] yes", "[epistemic status: 70] negative"],
                   [row("Yes", "Is the user's mood positive?"), row("positive")], data), ("a", "b"))]
    metrics = task.aggregate(mixed, None, "test")
    assert metrics["accuracy"] == 0.5 and metrics["informativeness"] == pytest.approx((1.0 + 0.1) / 2)


def test_with_the_label_judge_an_open_reference_is_masked_not_counted_right(tmp_path):
    task = build_task(compose_run_config(["experiment=oracle_tiny"]))  # judge=label
    scores = task.score(["[epistemic status: 90] negative", "[epistemic status: 90] No"],
                        [row("positive"), row("No", "Is the user's mood negative?")], judged(task))
    assert scores[0] == {"confidence": 0.9, "parsed": 1.0, "judge_failed": 1.0}  # no yes/no label to judge by
    assert scores[1]["correct"] == 1.0
    with pytest.raises(ValueError, match="not yes/no"):
        task.score_one("[epistemic status: 90] negative", row("positive"))
