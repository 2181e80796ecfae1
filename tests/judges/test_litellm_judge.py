"""The litellm judge, through real litellm and real HTTP against a local OpenAI-compatible server (ao_calib/judges/rule_server.py).

No function is mocked: every judgment goes litellm -> aiohttp -> 127.0.0.1 -> the test server. Timeouts and
backoffs are short, so the whole file runs in a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest
from omegaconf import OmegaConf

from ao_calib.core.errors import AOCalibError
from ao_calib.judges import JudgeContext
from ao_calib.judges.base import JudgeItem
from ao_calib.judges.cache import JudgmentCache, judgment_key
from ao_calib.judges.config import LiteLLMJudgeConfig
from ao_calib.judges.litellm_judge import LiteLLMJudge, parse_score
from ao_calib.judges.requests import PLACEHOLDER_API_KEY, import_litellm, register_free_if_unpriced
from ao_calib.judges.rule_server import Behaviour, JudgeServer
from ao_calib_tasks.oracle.prompt import JUDGE_PROMPT as DEFAULT_JUDGE_PROMPT

pytestmark = pytest.mark.timeout(60)

MODEL = "openai/judge-test"  # not in litellm's price list: cost is 0.0
SECRET = "sk-test-DO-NOT-LEAK-1234567890"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server():
    with JudgeServer() as s:
        yield s


def make_judge(server, cache_dir=None, **kw) -> LiteLLMJudge:
    opts = dict(model=MODEL, prompt=DEFAULT_JUDGE_PROMPT, api_base=server.api_base, max_concurrency=8,
                timeout_s=2.0, max_retries=2, backoff_s=0.01, cache_dir=cache_dir)
    opts.update(kw)
    return LiteLLMJudge(LiteLLMJudgeConfig(**opts))


def item(answer: str, question: str = "Is the text about cats?", prompt: str = "The cat sat on the mat.") -> JudgeItem:
    return JudgeItem(prompt=prompt, question=question, answer=answer)


def run(judge, items):
    return asyncio.run(judge.score(items))


# --------------------------------------------------------------------------------------------- parse_score


@pytest.mark.parametrize("text, expected", [
    ("SCORE: 87", 0.87),
    ("Score: 87/100", 0.87),
    ("score:100", 1.0),
    ("SCORE: 0", 0.0),
    ("**Final score:** 42", 0.42),
    ("Score = 55.5", 0.555),
    ("The score is 30 out of 100", 0.30),
    ("Score: 8/10", 0.8),
    ("A perfect answer would score 100.\nI considered Score: 20 first.\nSCORE: 70", 0.70),
    ("Reasoning: the text has 3 facts and the answer gets 2 right.\n65", 0.65),
    ("Thinking...\n**65**\n", 0.65),
    ("SCORE: 90\nOn reflection, lower.\nSCORE: 40", 0.40),
    ("SCORE: 80\n\n75/100", 0.75),
])
def test_parse_score_takes_the_final_score(text, expected):
    assert parse_score(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", [
    None, "", "No idea.", "The answer is good.", "SCORE: <0-100>", "SCORE: 150", "SCORE: -5", "Score: 12/10",
    "SCORE: 90\nwait, make that SCORE: 101", "There are 3 cats in 2 rooms.",
])
def test_parse_score_none_when_missing_or_out_of_range(text):
    assert parse_score(text) is None


# --------------------------------------------------------------------------------------------- the cache


def test_cache_roundtrip_atomic_files_and_corruption(tmp_path):
    cache = JudgmentCache(tmp_path / "c")
    k = judgment_key("m", "full prompt", "q", "a")
    assert k != judgment_key("m", "full prompt", "q", "b") != judgment_key("m2", "full prompt", "q", "a")
    assert k != judgment_key("m", "full prompt", "q2", "a") != judgment_key("m", "other prompt", "q", "a")
    assert cache.get(k) is None
    cache.put(k, 0.9, "SCORE: 90")
    assert cache.get(k) == 0.9
    path = tmp_path / "c" / k[:2] / f"{k}.json"
    assert path.is_file() and json.loads(path.read_text())["raw"] == "SCORE: 90"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left behind
    assert JudgmentCache(tmp_path / "c").get(k) == 0.9  # another instance (or process) sees it
    for bad in ('{"key": "%s", "score": 0.5' % k, "not json", '{"key": "other", "score": 0.5}',
                '{"key": "%s", "score": 7}' % k, '{"key": "%s", "score": true}' % k, "[1, 2]", "\xff"):
        path.write_text(bad, encoding="latin-1")
        assert cache.get(k) is None, bad
    cache.put(k, 0.25, "SCORE: 25")  # overwrites the corrupt file
    assert cache.get(k) == 0.25
    with pytest.raises(ValueError):
        cache.put(k, 1.5, "SCORE: 150")


def test_cache_concurrent_writers_from_threads(tmp_path):
    cache = JudgmentCache(tmp_path)
    keys = [judgment_key("m", str(i % 5), "q", "a") for i in range(200)]

    def write(i):
        cache.put(keys[i], (i % 5) / 10, f"SCORE: {i % 5 * 10}")
        assert cache.get(keys[i]) == (i % 5) / 10

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(keys))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 5 and not list(tmp_path.glob("*/*.tmp"))


# --------------------------------------------------------------------------------------------- scoring


def test_scores_are_normalised_and_requests_are_well_formed(server):
    judge = make_judge(server, temperature=0.0, max_tokens=64)
    assert run(judge, [item("yes"), item("no"), item("Yes"), item("maybe")]) == [0.9, 0.1, 0.9, 0.1]
    assert server.stats.total == 4 and server.stats.by_status == {200: 4}
    body = server.stats.bodies[0]
    assert body["model"] == "judge-test" and body["temperature"] == 0.0 and body["max_tokens"] == 64
    content = body["messages"][0]["content"]
    assert body["messages"][0]["role"] == "user" and content.startswith("You are grading")
    assert "The cat sat on the mat." in content and "Is the text about cats?" in content
    assert set(server.stats.auth) == {f"Bearer {PLACEHOLDER_API_KEY}"}  # no key in env: the placeholder


def test_final_score_is_taken_after_reasoning(server):
    server.behaviour.rule = lambda text: ("First impression: Score: 20.\nThe text has 3 parts; 100 would be too "
                                          "generous.\nScore = 35 was my draft.\nSCORE: 70/100")
    assert run(make_judge(server), [item("anything")]) == [0.7]


def test_identical_items_are_judged_once(server):
    judge = make_judge(server)
    assert run(judge, [item("yes"), item("no"), item("yes"), item("yes")]) == [0.9, 0.1, 0.9, 0.9]
    assert server.stats.total == 2
    s = judge.pop_step_stats()
    assert (s["judge/items"], s["judge/unique"], s["judge/calls"]) == (4, 2, 2)


def test_slow_server_with_bounded_concurrency(server):
    server.behaviour.latency_s = 0.15
    judge = make_judge(server, max_concurrency=3)
    start = time.perf_counter()
    scores = run(judge, [item("yes" if i % 2 else f"no {i}", question=f"q{i}") for i in range(12)])
    wall = time.perf_counter() - start
    assert scores == [0.9 if i % 2 else 0.1 for i in range(12)]
    assert server.stats.max_in_flight == 3  # reached, never exceeded
    assert wall >= 4 * 0.15 * 0.95  # 12 items / 3 at a time = 4 waves
    stats = judge.pop_step_stats()
    assert stats["judge/latency_mean_s"] >= 0.15 and stats["judge/latency_p95_s"] >= stats["judge/latency_mean_s"]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_transient_errors_are_retried(server, status):
    server.behaviour.fail_first, server.behaviour.error_status = 3, status
    judge = make_judge(server, max_retries=3)
    assert run(judge, [item("yes"), item("no")]) == [0.9, 0.1]
    assert server.stats.by_status[status] == 3 and server.stats.by_status[200] == 2
    s = judge.pop_step_stats()
    assert (s["judge/calls"], s["judge/errors"], s["judge/retries"], s["judge/failures"]) == (5, 3, 3, 0)


def test_permanent_failure_is_masked_never_zero(server, capfd):
    server.behaviour.error_rate = 1.0
    judge = make_judge(server, max_retries=2)
    scores = run(judge, [item("yes"), item("no"), item("no")])
    assert scores == [None, None, None]
    assert server.stats.total == 2 * 3 and server.stats.by_status == {500: 6}
    s = judge.pop_step_stats()
    assert (s["judge/failures"], s["judge/masked"], s["judge/retries"], s["judge/calls"]) == (2, 3, 4, 6)
    assert judge.stats.failures == 2
    out, err = capfd.readouterr()
    assert "LiteLLM" not in out + err and "Give Feedback" not in out + err  # litellm's own chatter is off
    server.behaviour.error_rate = 0.0  # a failure is not cached: the next step asks again
    assert run(judge, [item("yes")]) == [0.9]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_non_retryable_errors_fail_at_once(server, status):
    server.behaviour.error_rate, server.behaviour.error_status = 1.0, status
    judge = make_judge(server, max_retries=3)
    assert run(judge, [item("yes")]) == [None]
    assert server.stats.total == 1
    assert judge.pop_step_stats()["judge/retries"] == 0


def test_timeouts_are_retried_then_masked(server):
    # A hung request is never answered while the test runs (hang_s is far beyond the file's 60 s pytest timeout),
    # so the judge can only return by giving up on its own timeout: nothing here measures how long that takes.
    server.behaviour.hang_s = 3600.0
    server.behaviour.timeout_first = 1
    judge = make_judge(server, timeout_s=0.3, max_retries=2)
    assert run(judge, [item("yes")]) == [0.9]  # one timeout, then a success
    assert server.stats.total == 2 and server.stats.by_status == {"hang": 1, 200: 1}
    s = judge.pop_step_stats()
    assert (s["judge/calls"], s["judge/errors"], s["judge/retries"], s["judge/failures"], s["judge/masked"]) \
        == (2, 1, 1, 0, 0)
    server.behaviour.timeout_rate = 1.0
    assert run(judge, [item("no")]) == [None]  # three timeouts (max_retries=2): masked
    assert server.stats.total == 5 and server.stats.by_status == {"hang": 4, 200: 1}
    s = judge.pop_step_stats()
    assert (s["judge/calls"], s["judge/errors"], s["judge/retries"], s["judge/failures"], s["judge/masked"]) \
        == (3, 3, 2, 1, 1)
    assert (judge.stats.calls, judge.stats.failures) == (5, 1)
    server.behaviour.timeout_rate = 0.0  # a timed-out judgment is not cached: the next step asks again
    assert run(judge, [item("no")]) == [0.1]
    assert server.stats.by_status == {"hang": 4, 200: 2}


def test_garbage_replies_are_retried_then_masked(server):
    server.behaviour.garbage_first = 1
    judge = make_judge(server, max_retries=2)
    assert run(judge, [item("yes")]) == [0.9]
    server.behaviour.garbage_rate = 1.0
    assert run(judge, [item("no")]) == [None]
    s = judge.pop_step_stats()
    assert (s["judge/calls"], s["judge/garbage"], s["judge/retries"], s["judge/failures"]) == (5, 4, 3, 1)
    server.behaviour.garbage_rate, server.behaviour.rule = 0.0, lambda text: "SCORE: 250"
    assert run(judge, [item("maybe")]) == [None]  # out of range counts as garbage too


def test_cache_hits_make_no_requests(server, tmp_path):
    items = [item("yes"), item("no"), item("other")]
    judge = make_judge(server, cache_dir=tmp_path)
    assert run(judge, items) == [0.9, 0.1, 0.1]
    assert server.stats.total == 3
    assert run(judge, items) == [0.9, 0.1, 0.1]
    assert server.stats.total == 3  # all from the cache
    assert judge.pop_step_stats()["judge/cache_hits"] == 3
    fresh = make_judge(server, cache_dir=tmp_path)  # a new judge (or process) with the same cache
    assert run(fresh, items) == [0.9, 0.1, 0.1]
    assert server.stats.total == 3 and fresh.stats.cache_hits == 3 and fresh.stats.calls == 0
    assert run(fresh, [item("yes", question="Is the text about dogs?")]) == [0.9]  # another question: a miss
    assert server.stats.total == 4
    other_model = make_judge(server, cache_dir=tmp_path, model="openai/judge-test-2")
    assert run(other_model, [item("yes")]) == [0.9]  # another judge model: a miss
    assert server.stats.total == 5
    # a corrupt cache file is a miss, then rewritten
    k = fresh.key(items[0])
    path = tmp_path / k[:2] / f"{k}.json"
    path.write_text("{truncated")
    assert run(fresh, items) == [0.9, 0.1, 0.1]
    assert server.stats.total == 6
    assert run(fresh, items) == [0.9, 0.1, 0.1] and server.stats.total == 6


def test_stats_add_up_and_reset(server):
    server.behaviour.fail_first = 1
    judge = make_judge(server, max_retries=2)
    run(judge, [item("yes"), item("no")])
    step1 = judge.pop_step_stats()
    assert (step1["judge/items"], step1["judge/calls"], step1["judge/retries"], step1["judge/errors"]) == (2, 3, 1, 1)
    ok = [r["body"]["messages"][0]["content"] for r in server.stats.requests if r["status"] == 200]
    assert len(ok) == 2 and step1["judge/prompt_tokens"] == sum(len(t.split()) for t in ok)  # the server's usage
    assert step1["judge/completion_tokens"] > 0
    assert step1["judge/cost_usd"] == 0.0  # an unpriced model: 0.0, no crash
    empty = judge.pop_step_stats()
    assert all(v == 0 for v in empty.values())
    run(judge, [item("maybe")])
    step2 = judge.pop_step_stats()
    totals = judge.totals()
    for k in ("judge/items", "judge/calls", "judge/retries", "judge/prompt_tokens", "judge/completion_tokens",
              "judge/failures", "judge/cache_hits", "judge/errors"):
        assert totals[k] == step1[k] + step2[k], k
    assert totals["judge/latency_mean_s"] > 0
    assert judge.stats.calls == 4 and judge.stats.extra["prompt_tokens"] == totals["judge/prompt_tokens"]
    assert set(step1) == set(totals) and all(isinstance(v, float) for v in totals.values())


def test_cost_is_recorded_for_priced_models(server):
    judge = make_judge(server, model="openai/gpt-4o-mini")  # priced in litellm's bundled map
    run(judge, [item("yes")])
    assert judge.pop_step_stats()["judge/cost_usd"] > 0


def test_unpriced_self_hosted_models_are_registered_as_free(server):
    litellm = import_litellm()
    model = "openai/judge-test-unpriced"
    with pytest.raises(Exception):
        litellm.get_model_info(model)
    LiteLLMJudge(LiteLLMJudgeConfig(model="openai/judge-test-no-base", prompt=DEFAULT_JUDGE_PROMPT, cache_dir=None))  # no api_base: left alone
    with pytest.raises(Exception):
        litellm.get_model_info("openai/judge-test-no-base")
    judge = make_judge(server, model=model)
    info = litellm.get_model_info(model)
    assert info["input_cost_per_token"] == 0.0 and info["output_cost_per_token"] == 0.0
    assert run(judge, [item("yes")]) == [0.9] and judge.pop_step_stats()["judge/cost_usd"] == 0.0
    assert not register_free_if_unpriced(litellm, "openai/gpt-4o-mini")  # priced: kept as it is
    assert litellm.get_model_info("openai/gpt-4o-mini")["input_cost_per_token"] > 0


def test_hosted_vllm_provider_reaches_a_self_hosted_server(server):
    """litellm's own HTTP path (no OpenAI SDK), recommended for self-hosted servers; no key needed."""
    judge = make_judge(server, model="hosted_vllm/judge-test", temperature=0.0, max_tokens=64)
    assert run(judge, [item("yes"), item("no")]) == [0.9, 0.1]
    body = server.stats.bodies[0]
    assert body["model"] == "judge-test" and body["max_tokens"] == 64
    assert body["messages"][0]["content"].startswith("You are grading")
    server.behaviour.fail_first, server.behaviour.error_status = 1, 503
    assert run(judge, [item("maybe")]) == [0.1]  # a 5xx is retried on this path too
    s = judge.pop_step_stats()
    assert (s["judge/calls"], s["judge/retries"], s["judge/failures"], s["judge/cost_usd"]) == (4, 1, 0, 0.0)


def test_api_key_comes_from_env_and_never_shows(server, monkeypatch, caplog, capfd):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.behaviour.fail_first, server.behaviour.error_status = 1, 401
    judge = make_judge(server)
    assert run(judge, [item("yes")]) == [None]  # 401: not retried
    assert run(judge, [item("yes")]) == [0.9]
    assert set(server.stats.auth) == {f"Bearer {SECRET}"}  # litellm read it from the environment
    out, err = capfd.readouterr()
    shown = [repr(judge), str(judge.stats), str(judge.pop_step_stats()), str(judge.totals()), str(vars(judge)),
             caplog.text, out, err]
    assert not any(SECRET in s for s in shown)


def test_works_from_asyncio_run_and_a_foreign_loop_thread(server):
    judge = make_judge(server)
    for i in range(3):  # a fresh loop each time
        assert run(judge, [item("yes", question=f"run {i}")]) == [0.9]
    # a long-lived loop on another thread, as TRL runs async reward functions
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        for i in range(2):
            fut = asyncio.run_coroutine_threadsafe(judge.score([item("no", question=f"thread {i}")]), loop)
            assert fut.result(timeout=10) == [0.1]
    finally:
        async def shutdown():  # cancel what litellm left running on the loop (its logging worker), as asyncio.run does
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()

    assert server.stats.total == 5


def test_from_config(server, tmp_path):
    cfg = OmegaConf.structured(LiteLLMJudgeConfig(name="litellm", model=MODEL, api_base=server.api_base,
                                                  max_concurrency=4, timeout_s=5.0, max_retries=1, backoff_s=0.01,
                                                  cache_dir=str(tmp_path / "judge")))
    judge = LiteLLMJudge.from_config(cfg, JudgeContext(default_prompt=DEFAULT_JUDGE_PROMPT))
    assert judge.max_concurrency == 4 and judge.prompt == DEFAULT_JUDGE_PROMPT  # prompt null: the task's
    assert judge.cache is not None and judge.cache.directory == tmp_path / "judge"
    assert run(judge, [item("yes")]) == [0.9]
    assert "litellm" in repr(judge) or "LiteLLMJudge" in repr(judge)


def test_bad_settings_are_rejected():
    with pytest.raises(AOCalibError):
        LiteLLMJudge(LiteLLMJudgeConfig(model=MODEL, prompt="Grade {answr}", cache_dir=None))
    with pytest.raises(AOCalibError):
        LiteLLMJudge(LiteLLMJudgeConfig(model=MODEL, prompt=DEFAULT_JUDGE_PROMPT, max_concurrency=0, cache_dir=None))


def test_importing_the_judges_loads_neither_litellm_nor_torch():
    code = ("import sys, ao_calib.judges, ao_calib.judges.litellm_judge, ao_calib.judges.cache; "
            "bad = [m for m in ('litellm', 'torch', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_server_counts_behaviour():
    with JudgeServer(Behaviour(latency_s=0.0)) as s:
        assert s.api_base.startswith("http://127.0.0.1:")
    assert s.stats.total == 0
