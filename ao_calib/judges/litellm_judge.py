"""An LLM judge through litellm: any provider, or a self-hosted OpenAI-compatible server through ``api_base``.

One ``score(items)`` call is one training step's batch. Identical items are judged once, cached judgments make no
request, and the rest run concurrently under ``max_concurrency``. A request that fails with a transient error (429,
5xx, a timeout, a lost connection) or whose reply holds no score is retried with exponential backoff; a judgment
that still fails is ``None`` (the sample is masked), never 0.

API keys come only from the environment, read by litellm itself; this module never reads, stores or logs one
(the requests themselves, their retries, the placeholder key for local servers and the cost of each reply:
``ao_calib.judges.requests``). litellm is imported lazily, on the first judge built.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields


from ao_calib.core.errors import AOCalibError
from ao_calib.judges.base import Judge, JudgeContext, JudgeItem, note_failure, to_settings
from ao_calib.judges.cache import JudgmentCache, judgment_key
from ao_calib.judges.config import LiteLLMJudgeConfig
from ao_calib.judges.requests import RetryingRequests, describe_error, import_litellm

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- parsing

_NUM = r"(-?\d+(?:\.\d+)?)"
_DENOM = r"(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?"
# "SCORE: 87", "Score: 87/100", "**Final score**: 87", "score = 87", "Score is 87 out of 100"
_LABELLED = re.compile(r"\bscore\b[\s*_`]*(?:[:=]|\bis\b)[\s*_`]*" + _NUM + _DENOM, re.I)
# A line that is only a number, optionally decorated: "87", "**87**", "87/100", "87."
_BARE_LINE = re.compile(r"^[\s*_`>#]*" + _NUM + _DENOM + r"[\s*_`.]*$", re.M)


def parse_score(text: str | None) -> float | None:
    """The final score in a judge's reply, normalised from 0-100 to [0, 1]; None when there is none or it is out of
    range.

    The last labelled score ("SCORE: 87", "Score: 87/100") or bare-number line ("87") wins, so reasoning before the
    verdict may mention other numbers. A denominator other than 100 ("8/10") scales by itself.
    """
    if not text:
        return None
    candidates = [(m.start(), m.group(1), m.group(2)) for m in _LABELLED.finditer(text)]
    candidates += [(m.start(), m.group(1), m.group(2)) for m in _BARE_LINE.finditer(text)]
    if not candidates:
        return None
    _, value, denom = max(candidates, key=lambda c: c[0])
    v = float(value)
    d = float(denom) if denom is not None else 100.0
    if d <= 0 or not math.isfinite(v) or not 0.0 <= v <= d:
        return None
    return v / d


# --------------------------------------------------------------------------------------------- stats


@dataclass
class _Counters:
    items: int = 0  # items asked for, duplicates included
    unique: int = 0  # distinct items after de-duplication
    cache_hits: int = 0  # distinct items answered from the disk cache
    calls: int = 0  # HTTP requests made, retries included
    retries: int = 0
    errors: int = 0  # requests that failed (status, timeout, connection)
    garbage: int = 0  # replies with no score in range
    failures: int = 0  # distinct judgments that still failed after the retries (masked)
    masked: int = 0  # items returned as None, duplicates included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    rate_limited_wait_s: float = 0.0  # time requests waited for the rate caps (max_*_per_minute)
    latencies: list[float] = field(default_factory=list)

    def as_dict(self, prefix: str = "judge/") -> dict[str, float]:
        out: dict[str, float] = {}
        for f in fields(self):
            if f.name != "latencies":
                out[prefix + f.name] = float(getattr(self, f.name))
        lat = sorted(self.latencies)
        out[prefix + "latency_mean_s"] = sum(lat) / len(lat) if lat else 0.0
        out[prefix + "latency_p95_s"] = lat[max(0, math.ceil(0.95 * len(lat)) - 1)] if lat else 0.0
        return out


# --------------------------------------------------------------------------------------------- judge


class RateLimiter:
    """Request and token caps per minute, as even spacing (no bursts): each request starts no earlier than
    ``60/rpm`` s after the previous one, and no earlier than its predecessors' tokens allow at ``tpm``. Tokens are
    reserved from an estimate and the difference settled when the reply reports its usage. Loop-agnostic (a thread
    lock and ``asyncio.sleep``), so one limiter covers every event loop the judge is used from."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None,
                 clock=time.monotonic):
        self.request_gap = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self.seconds_per_token = 60.0 / tokens_per_minute if tokens_per_minute else 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._next_request = 0.0  # earliest start of the next request under the request cap
        self._next_tokens = 0.0  # ... under the token cap

    @property
    def active(self) -> bool:
        return bool(self.request_gap or self.seconds_per_token)

    async def acquire(self, tokens: int) -> float:
        """Waits for this request's turn; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            start = max(now, self._next_request, self._next_tokens)
            self._next_request = start + self.request_gap
            self._next_tokens = max(self._next_tokens, start) + tokens * self.seconds_per_token
        wait = start - now
        if wait > 0:
            await asyncio.sleep(wait)
        return max(wait, 0.0)

    def settle(self, estimated: int, actual: int) -> None:
        """The reply's real token count replaces the estimate (a smaller one gives the difference back)."""
        if self.seconds_per_token and actual != estimated:
            with self._lock:
                self._next_tokens += (actual - estimated) * self.seconds_per_token


def estimated_tokens(text: str, max_tokens: int) -> int:
    """A request's token cost before it is sent: about four characters a token, plus the longest reply."""
    return len(text) // 4 + 1 + max_tokens


class LiteLLMJudge(Judge):
    """Scores items with an LLM through ``litellm.acompletion``; see the module docstring."""

    config_class = LiteLLMJudgeConfig

    @classmethod
    def missing_resources(cls, settings) -> list[str]:
        """The provider's API key, when the judge is a hosted model (no ``api_base``) and its environment variable
        is unset: named before the run loads anything (``ao_calib.preflight.resources``)."""
        if settings.api_base or not settings.model:
            return []
        keys = import_litellm().validate_environment(model=settings.model).get("missing_keys") or []
        return [f"the environment variable {' and '.join(keys)} for judge.model={settings.model} (or a "
                "self-hosted judge: judge.api_base=http://HOST:PORT/v1)"] if keys else []

    def __init__(self, settings: LiteLLMJudgeConfig, default_prompt: str | None = None):
        """``settings.prompt`` or, when it is null, ``default_prompt`` (the task's grading prompt)."""
        super().__init__()
        prompt = settings.prompt or default_prompt
        if not settings.model:
            raise AOCalibError("judge.model must name a litellm model, e.g. openai/gpt-4o-mini")
        if not prompt:
            raise AOCalibError("judge.prompt is null and the task has no grading prompt: set judge.prompt")
        # The rate caps, concurrency, retries, timeout and backoff are checked by LiteLLMJudgeConfig itself.
        try:
            prompt.format(prompt="", question="", answer="", label="")
        except (KeyError, IndexError, ValueError) as e:
            raise AOCalibError(f"judge.prompt is not a valid format string with {{prompt}}, {{question}} and "
                               f"{{answer}}: {e!r}") from None
        self.model = settings.model
        self.prompt = prompt
        self.api_base = settings.api_base or None
        self.max_tokens = int(settings.max_tokens)
        self.max_concurrency = int(settings.max_concurrency)
        self.timeout_s = float(settings.timeout_s)
        self.max_retries = int(settings.max_retries)
        self.cache = JudgmentCache(settings.cache_dir) if settings.cache_dir else None
        self._litellm = import_litellm()
        self._lock = threading.Lock()
        self._step = _Counters()
        self._total = _Counters()
        self._semaphores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._requests = RetryingRequests(
            self._litellm, self.model, self.api_base, temperature=settings.temperature, max_tokens=self.max_tokens,
            timeout_s=self.timeout_s, max_retries=self.max_retries, backoff_s=settings.backoff_s,
            jitter=settings.jitter, count=self._add,
            limiter=RateLimiter(settings.max_requests_per_minute, settings.max_tokens_per_minute))

    @classmethod
    def from_config(cls, cfg, context: JudgeContext) -> LiteLLMJudge:
        return cls(to_settings(cfg), context.default_prompt)

    def __repr__(self) -> str:
        return (f"LiteLLMJudge(model={self.model!r}, api_base={self.api_base!r}, "
                f"max_concurrency={self.max_concurrency}, timeout_s={self.timeout_s}, max_retries={self.max_retries}, "
                f"cache_dir={str(self.cache.directory) if self.cache else None!r})")

    # ----------------------------------------------------------------------------------------- stats

    def _add(self, **counts) -> None:
        with self._lock:
            for counters in (self._step, self._total):
                for k, v in counts.items():
                    if k == "latency":
                        counters.latencies.append(v)
                    else:
                        setattr(counters, k, getattr(counters, k) + v)
            self.stats.calls = self._total.calls
            self.stats.failures = self._total.failures
            self.stats.cache_hits = self._total.cache_hits

    def _sync_extra(self) -> None:
        """``self.stats.extra``: the other lifetime numbers, refreshed once per ``score`` call."""
        totals = self.totals()
        self.stats.extra = {k.removeprefix("judge/"): v for k, v in totals.items()
                            if k not in ("judge/calls", "judge/failures", "judge/cache_hits")}

    def pop_step_stats(self) -> dict[str, float]:
        """``judge/...`` counts and means since the last pop (or since the judge was built), then starts afresh."""
        with self._lock:
            step, self._step = self._step, _Counters()
        return step.as_dict()

    def totals(self) -> dict[str, float]:
        """The same ``judge/...`` numbers over the judge's lifetime (for summary.json)."""
        with self._lock:
            return self._total.as_dict()

    # ----------------------------------------------------------------------------------------- scoring

    def render(self, item: JudgeItem) -> str:
        """The full prompt text sent for ``item``."""
        return self.prompt.format(prompt=item.prompt, question=item.question, answer=item.answer,
                                  label=item.label or "")

    def key(self, item: JudgeItem, text: str | None = None) -> str:
        return judgment_key(self.model, self.render(item) if text is None else text, item.question, item.answer)

    async def score(self, items: Sequence[JudgeItem]) -> list[float | None]:
        items = list(items)
        if not items:
            return []
        keys: list[str] = []
        texts: dict[str, str] = {}
        for item in items:
            text = self.render(item)
            k = self.key(item, text)
            keys.append(k)
            texts.setdefault(k, text)
        results: dict[str, float | None] = {}
        reasons: Counter = Counter()
        todo: list[str] = []
        for k in texts:
            cached = self.cache.get(k) if self.cache is not None else None
            if cached is not None:
                results[k] = cached
            else:
                todo.append(k)
        self._add(items=len(items), unique=len(texts), cache_hits=len(texts) - len(todo))
        if todo:
            sem = self._semaphore()
            judged = await asyncio.gather(*(self._judge_and_store(k, texts[k], sem) for k in todo))
            for k, (value, _, _) in zip(todo, judged):
                results[k] = value
            reasons = Counter(reason for value, _, reason in judged if value is None)
        out = [results[k] for k in keys]
        failed = sum(1 for k in todo if results[k] is None)
        self._add(failures=failed, masked=sum(1 for v in out if v is None))
        self._sync_extra()
        if failed:
            log.warning("judge %s: %d of %d judgments failed and are masked (%s)", self.model, failed, len(todo),
                        "; ".join(f"{n}x {r}" for r, n in reasons.most_common()))
            note_failure(f"{self.model}" + (f" at {self.api_base}" if self.api_base else ""),
                         reasons.most_common(1)[0][0])
        return out

    def _semaphore(self) -> asyncio.Semaphore:
        """One semaphore per event loop: concurrent ``score`` calls on one loop share the bound."""
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._semaphores.get(loop)
            if sem is None:
                sem = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
            return sem

    async def _judge_and_store(self, key: str, text: str, sem: asyncio.Semaphore):
        """``_judge``, then the judgment goes to the disk cache at once (a failure is never cached)."""
        value, raw, reason = await self._judge(text, sem)
        if value is not None and self.cache is not None:
            try:
                # Off the event loop: creating a file costs ~0.5 ms of syscalls, which overlap other requests here.
                await asyncio.get_running_loop().run_in_executor(None, self.cache.put, key, value, raw)
            except OSError as e:
                log.warning("judge cache: could not write a judgment (%s)", describe_error(e))
        return value, raw, reason

    async def _judge(self, text: str, sem: asyncio.Semaphore) -> tuple[float | None, str | None, str]:
        """One judgment with retries (``ao_calib.judges.requests``): (score, raw reply, "") or (None, None, why it
        failed)."""
        return await self._requests.ask(text, parse_score, sem, unusable="reply without a score",
                                        estimate=estimated_tokens(text, self.max_tokens))
