"""One LLM request through litellm with retries: what the litellm judge and ``make_questions`` (the oracle task's
question writer) both do for every item they send.

A request that fails for a reason worth retrying (``is_retryable``: 429, 5xx, a timeout, a lost connection) or
whose reply ``parse`` cannot use is retried after an exponential backoff with jitter; any other error ends it at
once. Every call, error, retry, unusable reply, token and dollar is reported to the caller's ``count`` (keyword
counters), so each caller keeps its own totals.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

PLACEHOLDER_API_KEY = "not-needed"
_RETRYABLE_STATUS = {408, 409, 425, 429}

# --------------------------------------------------------------------------------------------- litellm

_litellm_lock = threading.Lock()


def import_litellm():
    """litellm, imported once, quietly: no debug hints, no telemetry, the bundled cost map."""
    with _litellm_lock:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        # litellm logs every request at INFO ("LiteLLM completion() model=..."), which floods a run's log.
        logging.getLogger("LiteLLM").setLevel(logging.WARNING)
        if hasattr(litellm, "telemetry"):
            litellm.telemetry = False
        return litellm


def _status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if code is None:
        code = getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) else None


def is_retryable(exc: BaseException) -> bool:
    """True for transient failures: 408/409/425/429, any 5xx, timeouts and connection errors; False for the rest
    (400, 401, 403, 404, 422, bad parameters, bugs)."""
    litellm = import_litellm()
    if isinstance(exc, (litellm.Timeout, litellm.RateLimitError, litellm.InternalServerError,
                        litellm.ServiceUnavailableError, litellm.BadGatewayError, litellm.APIConnectionError)):
        return True
    code = _status_code(exc)
    if code is not None:
        return code in _RETRYABLE_STATUS or code >= 500
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError, OSError))


def describe_error(exc: BaseException) -> str:
    """The exception's class and status code only: messages may quote request details. A connection that could
    not be made is named as such: litellm files it under status 500, which would read as a server error."""
    if _is_connection_error(exc):
        return f"connection failed ({type(exc).__name__}: no answer from the server)"
    code = _status_code(exc)
    return type(exc).__name__ + (f" ({code})" if code is not None else "")


# Transport errors that mean no connection was made. litellm wraps them (a refused connection arrives as an
# InternalServerError, status 500), and its own APIConnectionError is also a catch-all, so the chain is read.
_TRANSPORT_ERRORS = {("httpx", "ConnectError"), ("aiohttp.client_exceptions", "ClientConnectorError"),
                     ("openai", "APIConnectionError")}


def _is_connection_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectionError) or (type(exc).__module__, type(exc).__name__) in _TRANSPORT_ERRORS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def completion_kwargs(litellm, model: str, text: str, *, api_base: str | None, temperature: float, max_tokens: int,
                      timeout_s: float) -> dict:
    """Arguments for one ``litellm.acompletion`` call of a single user message. Retries are the caller's: no SDK
    or litellm retries underneath. A local OpenAI-compatible server with no key in the environment gets a
    placeholder key; a real key is only ever read by litellm from the environment."""
    kwargs = dict(model=model, messages=[{"role": "user", "content": text}], temperature=temperature,
                  max_tokens=max_tokens, timeout=timeout_s, max_retries=0, num_retries=0,
                  drop_params=True)  # e.g. models that reject temperature
    if api_base:
        kwargs["api_base"] = api_base
        if _is_openai_model(litellm, model) and not os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = PLACEHOLDER_API_KEY
    return kwargs


def _is_openai_model(litellm, model: str) -> bool:
    if "/" in model:
        return model.split("/", 1)[0] == "openai"
    try:
        return litellm.get_llm_provider(model)[1] == "openai"
    except Exception:  # noqa: BLE001 - an unknown model is simply not an OpenAI one
        return False


def response_text(response) -> str | None:
    """The reply text of a chat completion, or None when the response has none."""
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return content if isinstance(content, str) else None


def register_free_if_unpriced(litellm, model: str) -> bool:
    """Give a model litellm has no price for a price of zero; True when it did.

    Only for models served from ``api_base``: a self-hosted server costs nothing per token, and without an entry
    litellm searches its whole cost map again for every response, which was about a tenth of the judge's CPU per
    request (BENCHMARKS.md)."""
    try:
        litellm.get_model_info(model)
        return False
    except Exception:  # noqa: BLE001 - litellm raises a plain Exception subclass for unmapped models
        pass
    try:
        provider = litellm.get_llm_provider(model)[1]
    except Exception:  # noqa: BLE001 - an unknown provider fails later, at the request, with a clear error
        return False
    zero = dict.fromkeys(("input_cost_per_token", "output_cost_per_token", "cache_creation_input_token_cost",
                          "cache_read_input_token_cost"), 0.0)
    litellm.register_model({model: {**zero, "litellm_provider": provider, "mode": "chat"}})
    log.info("judge: litellm has no price for %s; it is served from api_base and counted as free", model)
    return True


class CostMeter:
    """litellm's price for each response; 0.0 for models without a known price (e.g. self-hosted ones).

    litellm already prices each response once (``_hidden_params["response_cost"]``, from ``completion_cost``);
    that value is used when present, so the work is not done twice. After one unpriced response the model is
    taken as unpriced, so the lookup is not retried on every call. A model served from ``api_base`` that litellm
    has no price for is registered as free first (``register_free_if_unpriced``)."""

    def __init__(self, litellm, model: str | None = None, api_base: str | None = None):
        self._litellm = litellm
        self._unknown = False
        if model and api_base:
            register_free_if_unpriced(litellm, model)

    def __call__(self, response) -> float:
        if self._unknown:
            return 0.0
        hidden = getattr(response, "_hidden_params", None)
        cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
        if cost is None:
            try:
                cost = self._litellm.completion_cost(completion_response=response)
            except Exception:  # noqa: BLE001 - unpriced (e.g. self-hosted) models
                self._unknown = True
                return 0.0
        try:
            cost = float(cost)
        except (TypeError, ValueError):
            return 0.0
        return cost if math.isfinite(cost) and cost > 0 else 0.0


# --------------------------------------------------------------------------------------------- retries



class RetryingRequests:
    """Requests to one litellm ``model``. ``count(**counters)`` receives ``calls``, ``errors``, ``retries``,
    ``garbage`` (unusable replies), ``latency``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd`` and,
    with a rate ``limiter``, ``rate_limited_wait_s``."""

    def __init__(self, litellm, model: str, api_base: str | None, *, temperature: float, max_tokens: int,
                 timeout_s: float, max_retries: int, backoff_s: float, jitter: float,
                 count: Callable[..., None], limiter: Any = None):
        self.litellm, self.model, self.api_base = litellm, model, api_base
        self.temperature, self.max_tokens, self.timeout_s = float(temperature), int(max_tokens), float(timeout_s)
        self.max_retries, self.backoff_s, self.jitter = int(max_retries), float(backoff_s), float(jitter)
        self.count = count
        self.limiter = limiter
        self.cost = CostMeter(litellm, model, api_base)
        self.rng = random.Random()

    def backoff(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (from 0): ``backoff_s`` doubled each time, plus up to ``jitter``
        of it at random, so that many requests failing at once do not come back at once."""
        delay = self.backoff_s * 2**retry
        return delay + self.rng.uniform(0, self.jitter * delay)

    def request_kwargs(self, text: str) -> dict:
        return completion_kwargs(self.litellm, self.model, text, api_base=self.api_base,
                                 temperature=self.temperature, max_tokens=self.max_tokens, timeout_s=self.timeout_s)

    async def ask(self, text: str, parse: Callable[[str | None], T | None], sem: asyncio.Semaphore, *,
                  unusable: str, estimate: int = 0) -> tuple[T | None, str | None, str]:
        """``(parse(reply), reply, "")``, or ``(None, None, why it failed)`` once the retries are spent.
        ``unusable`` says what a reply ``parse`` returns None for lacks; ``estimate``: the request's tokens, for
        the rate limiter."""
        kwargs = self.request_kwargs(text)
        guard = self.timeout_s * 1.5 + 1.0  # in case the client's own timeout never fires
        last = "no attempt"
        limited = self.limiter is not None and self.limiter.active
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.count(retries=1)
                await asyncio.sleep(self.backoff(attempt - 1))
            async with sem:
                if limited:  # a retry counts against the caps too: the provider counts it
                    self.count(rate_limited_wait_s=await self.limiter.acquire(estimate))
                start = time.perf_counter()
                try:
                    response = await asyncio.wait_for(self.litellm.acompletion(**kwargs), guard)
                except Exception as e:  # noqa: BLE001 - classified below; CancelledError passes through
                    self.count(calls=1, errors=1, latency=time.perf_counter() - start)
                    last = describe_error(e)
                    if not is_retryable(e):
                        return None, None, f"{last}, not retried"
                    log.debug("%s: attempt %d failed: %s", self.model, attempt + 1, last)
                    continue
                latency = time.perf_counter() - start
            raw = response_text(response)
            usage = getattr(response, "usage", None)
            prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            if limited and usage is not None:
                self.limiter.settle(estimate, prompt_tokens + completion_tokens)
            self.count(calls=1, latency=latency, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                       cost_usd=self.cost(response))
            value = parse(raw)
            if value is not None:
                return value, raw, ""
            self.count(garbage=1)
            last = unusable
            log.debug("%s: attempt %d: %s", self.model, attempt + 1, last)
        return None, None, f"{last} after {self.max_retries + 1} attempts"
