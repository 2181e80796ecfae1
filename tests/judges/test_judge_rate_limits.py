"""The litellm judge's requests- and tokens-per-minute caps, through real litellm against the loopback server."""

from __future__ import annotations

import asyncio
import time

import pytest

from ao_calib.core.errors import AOCalibError
from ao_calib.judges.base import JudgeItem
from ao_calib.judges.config import LiteLLMJudgeConfig
from ao_calib.judges.litellm_judge import LiteLLMJudge, RateLimiter
from ao_calib.judges.rule_server import JudgeServer
from ao_calib_tasks.oracle.prompt import JUDGE_PROMPT as DEFAULT_JUDGE_PROMPT

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with JudgeServer() as s:
        yield s


def judge(server, **caps) -> LiteLLMJudge:
    return LiteLLMJudge(LiteLLMJudgeConfig(model="openai/judge-test", prompt=DEFAULT_JUDGE_PROMPT,
                                           api_base=server.api_base, max_concurrency=8, timeout_s=5.0,
                                           max_retries=0, cache_dir=None, max_tokens=16, **caps))


def items(n):
    return [JudgeItem(prompt="The cat sat.", question=f"Is it about cats? ({i})", answer="yes") for i in range(n)]


def test_requests_per_minute_spaces_requests(server):
    j = judge(server, max_requests_per_minute=600)  # one request every 0.1 s
    start = time.perf_counter()
    scores = asyncio.run(j.score(items(6)))
    wall = time.perf_counter() - start
    assert scores == [0.9] * 6 and server.stats.total == 6
    assert wall >= 5 * 0.1 * 0.95  # six starts, five gaps; concurrency 8 alone would take one round trip
    assert server.stats.max_in_flight <= 2
    assert j.totals()["judge/rate_limited_wait_s"] >= 5 * 0.1 * 0.9


def test_tokens_per_minute_uses_the_reported_usage(server):
    j = judge(server, max_tokens_per_minute=60_000)  # 1 ms a token
    before = time.perf_counter()
    asyncio.run(j.score(items(4)))
    wall = time.perf_counter() - before
    used = j.totals()["judge/prompt_tokens"] + j.totals()["judge/completion_tokens"]
    # the first three requests' real usage must pass before the fourth starts (the first starts at once)
    assert wall >= 0.75 * used / 1000 * 0.9


def test_uncapped_judge_does_not_wait(server):
    j = judge(server)
    asyncio.run(j.score(items(4)))
    assert j.totals()["judge/rate_limited_wait_s"] == 0.0


def test_limiter_settles_estimates_against_usage():
    clock = [100.0]
    limiter = RateLimiter(None, 600, clock=lambda: clock[0])  # 0.1 s a token
    assert asyncio.run(limiter.acquire(10)) == 0.0
    limiter.settle(estimated=10, actual=4)  # gave back 6 tokens = 0.6 s
    assert limiter._next_tokens == pytest.approx(100.4)


@pytest.mark.parametrize("cap", ["max_requests_per_minute", "max_tokens_per_minute"])
def test_non_positive_caps_are_refused(server, cap):
    with pytest.raises(AOCalibError, match=f"judge.{cap}"):
        judge(server, **{cap: 0})
