"""task.min_no_call_probability: an empty answer kept only where the model is that sure of it, else its best answer
that is not empty; through evaluation's second look at greedy answers (Task.revise_answers), on the tiny Qwen3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from ao_calib_tasks.function_call.no_call import (
    EmptyAnswerTokens,
    RefuseEmptyAnswer,
    answer_no_call_only_if_sure,
    is_empty,
    no_call_probability,
    prompt_ids,
)
from transformers import AutoModelForCausalLM, AutoTokenizer

from ao_calib.config.compose import compose_run_config
from ao_calib.evaluation.evaluate import evaluate
from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import build_task

FIXTURE = Path(__file__).parents[2] / "data" / "bfcl"
BFCL = ["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl",
        f"task.data.train_path={FIXTURE / 'BFCL_v4_simple_python.json'}",
        f"task.data.test_path={FIXTURE / 'BFCL_v4_parallel.json'}"]


@pytest.fixture(scope="module")
def tiny(offline_env):
    path = ensure_tiny_model(TinyModelSpec(), offline_env / "tiny_models")
    torch.manual_seed(0)
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def refused_after(processor, tokenizer, prompt: list[int], answer: str) -> set[int]:
    ids = torch.tensor([prompt + tokenizer(answer, add_special_tokens=False)["input_ids"]])
    scores = processor(ids, torch.zeros(1, len(tokenizer)))
    return set(torch.isinf(scores[0]).nonzero().flatten().tolist())


def test_the_best_answer_cannot_start_empty(tiny):
    tokenizer, _ = tiny
    prompt = tokenizer("Call a function.", add_special_tokens=False)["input_ids"]
    processor = RefuseEmptyAnswer(tokenizer, EmptyAnswerTokens.of(tokenizer), len(prompt))
    first = refused_after(processor, tokenizer, prompt, "")
    assert tokenizer.eos_token_id in first
    assert {tokenizer.decode([i], skip_special_tokens=True).strip() for i in first} <= {"", "[]"}
    assert refused_after(processor, tokenizer, prompt, "\n\n") == first  # blank so far: still refused
    after_open = refused_after(processor, tokenizer, prompt, "[")
    assert after_open and {tokenizer.decode([i]).strip() for i in after_open} == {"]"}
    assert refused_after(processor, tokenizer, prompt, "[get_weather(") == set()


def test_empty_answers_below_the_threshold_become_the_best_call(tiny):
    tokenizer, model = tiny
    cfg = compose_run_config(BFCL)
    template = dict(cfg.model.chat_template_kwargs)
    rows = build_task(cfg).build_data(tokenizer=None).test.to_list()[:4]
    answers = ["[]", "", rows[2]["answer"], " [] "]
    tokens = EmptyAnswerTokens.of(tokenizer)
    p = {i: no_call_probability(model, prompt_ids(tokenizer, rows[i], template), tokens.continuations)
         for i in (0, 1, 3)}
    assert all(0 < v < 1 for v in p.values())

    def revised(threshold: float):
        return answer_no_call_only_if_sure(model, tokenizer, rows, answers, threshold=threshold,
                                           chat_template_kwargs=template, max_new_tokens=8)

    out, replaced, empty = revised(1.0)
    assert empty == 3 and replaced == 3 and out[2] == answers[2] and not any(is_empty(out[i]) for i in (0, 1, 3))
    assert revised(min(p.values())) == (answers, 0, 3)  # every empty answer is at least that sure
    # a threshold between two of them replaces the less sure one only
    low, high = sorted(p, key=p.get)[:2]
    if p[low] < p[high]:
        out, replaced, _ = revised((p[low] + p[high]) / 2)
        assert replaced == 1 and not is_empty(out[low]) and out[high] == answers[high]


def test_evaluation_gives_greedy_answers_a_second_look(tiny, tmp_path):
    tokenizer, model = tiny
    cfg = compose_run_config([*BFCL, "task.min_no_call_probability=1.0"])
    task = build_task(cfg)
    data = task.build_data(tokenizer, model)
    looks = []

    class EveryAnswerEmpty(type(task)):  # the real rule, given answers that are all empty
        def revise_answers(self, model, tokenizer, rows, answers, **kwargs):
            looks.append(len(answers))
            return super().revise_answers(model, tokenizer, rows, ["[]"] * len(answers), **kwargs)

    task.__class__ = EveryAnswerEmpty
    kwargs = {"num_samples": 2, "batch_size": 2, "max_new_tokens": 6, "merged_copy": False,
              "confidence_decoding": cfg.eval.confidence_decoding,
              "chat_template_kwargs": dict(cfg.model.chat_template_kwargs), "run_dir": RunDir(tmp_path)}
    evaluate(task, model, tokenizer, data, tag="greedy", **kwargs)
    assert looks == [2]
    written = [json.loads(line)["completion"] for line in RunDir(tmp_path).predictions("greedy").read_text().splitlines()]
    assert len(written) == 2 and not any(map(is_empty, written))  # at 1.0 no empty answer is sure enough
    evaluate(task, model, tokenizer, data, tag="sampled", temperature=1.0, **kwargs)
    assert looks == [2]  # sampled answers are scored as drawn


def test_the_threshold_is_checked_at_start_up():
    for refused, needle in (("task.min_no_call_probability=0", "min_no_call_probability"),
                            ("task.min_no_call_probability=1.5", "min_no_call_probability")):
        with pytest.raises(Exception, match=needle):
            build_task(compose_run_config([*BFCL, refused]))
    with pytest.raises(Exception, match="data.format=bfcl"):
        build_task(compose_run_config(["task=function_call", "model=tiny_qwen3",
                                       "task.min_no_call_probability=0.5"]))
    with pytest.raises(Exception, match="calibrated"):
        build_task(compose_run_config([*BFCL, "reward=calibrated_function_call", "task.min_no_call_probability=0.5"]))
