"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for testing and benchmarking LLM judges.

It runs an aiohttp application on its own event loop in a background thread, so it serves many requests at once
and works with any client (sync or async, in or out of an event loop). Behaviour is set per test through
``server.behaviour`` (see :class:`Behaviour`) and every request is counted.

    with JudgeServer() as server:
        server.behaviour.latency_s = 0.1
        ... point a client at server.api_base ...
        assert server.stats.total == 3

By default the reply is derived from the answer being graded (the ``Answer to grade: ...`` line of the default
judge prompt, or an ``A: ...`` line): ``yes`` scores 90, anything else 10, each after a few lines of reasoning that
contain other numbers, so a client must take the final score.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

GARBAGE_REPLY = "I am not able to grade this answer. It seems fine, I guess."
ANSWER_LINE = re.compile(r"^(?:Answer to grade|A):\s*(.*)$", re.M)


def default_rule(prompt_text: str) -> str:
    """The deterministic grading rule: answer "yes" scores 90, anything else 10, after reasoning with numbers."""
    found = ANSWER_LINE.findall(prompt_text)
    answer = found[-1].strip().lower() if found else ""
    score = 90 if answer == "yes" else 10
    return (
        "Let me think step by step.\n"
        "1. The text has 3 sentences; a perfect answer would score 100.\n"
        f"2. The answer given was {answer!r}.\n"
        f"SCORE: {score}"
    )


RULES = {"yes": default_rule}


@dataclass
class Behaviour:
    """What the server does with the next requests. Counters such as ``fail_first`` count down as they are used."""

    latency_s: float = 0.0  # every request waits this long before answering
    fail_first: int = 0  # the next N requests are answered with ``error_status``
    error_rate: float = 0.0  # then this fraction (seeded, reproducible) is answered with ``error_status``
    error_status: int = 500
    timeout_first: int = 0  # the next N requests hang for ``hang_s`` (longer than the client's timeout)
    timeout_rate: float = 0.0
    hang_s: float = 5.0
    garbage_first: int = 0  # the next N requests get a reply with no score in it
    garbage_rate: float = 0.0
    rule: Callable[[str], str] = default_rule  # prompt text -> reply text
    seed: int = 0


@dataclass
class ServerStats:
    total: int = 0
    by_status: Counter = field(default_factory=Counter)  # 200, 429, 500, ..., and "hang" for timed-out requests
    in_flight: int = 0
    max_in_flight: int = 0
    requests: list[dict] = field(default_factory=list)  # per request, in arrival order: body, auth, status

    @property
    def bodies(self) -> list:
        return [r["body"] for r in self.requests]

    @property
    def auth(self) -> list[str]:
        return [r["auth"] for r in self.requests]


class JudgeServer:
    """Start with ``with JudgeServer() as s`` (or ``start()``/``stop()``); ``s.api_base`` ends in ``/v1``."""

    def __init__(self, behaviour: Behaviour | None = None, max_requests: int = 100_000, port: int = 0):
        self.requested_port = port  # 0: any free port
        self.behaviour = behaviour or Behaviour()
        self.stats = ServerStats()
        self.max_requests = max_requests  # a safety bound: beyond it every request gets 503 at once
        self._lock = threading.Lock()
        self._rng = random.Random(self.behaviour.seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self.port: int | None = None

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> JudgeServer:
        ready = threading.Event()
        errors: list[BaseException] = []

        def serve():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start_app())
            except BaseException as e:  # noqa: BLE001 - surfaced to the caller of start()
                errors.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="judge-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("judge server did not start within 10 s")
        if errors:
            raise errors[0]
        return self

    async def _start_app(self):
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/reset_stats", self._reset_stats)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0,
                                     handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host="127.0.0.1", port=self.requested_port, backlog=512)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._stopping.set)  # wakes hanging handlers
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def reset_stats(self) -> None:
        with self._lock:
            self.stats = ServerStats()

    # ------------------------------------------------------------------------------------------ requests

    def _decide(self) -> str:
        """One of "error", "hang", "garbage", "ok" for the next request (under the lock)."""
        b = self.behaviour
        if b.fail_first > 0:
            b.fail_first -= 1
            return "error"
        if b.timeout_first > 0:
            b.timeout_first -= 1
            return "hang"
        if b.garbage_first > 0:
            b.garbage_first -= 1
            return "garbage"
        if b.error_rate and self._rng.random() < b.error_rate:
            return "error"
        if b.timeout_rate and self._rng.random() < b.timeout_rate:
            return "hang"
        if b.garbage_rate and self._rng.random() < b.garbage_rate:
            return "garbage"
        return "ok"

    def _count(self, record: dict, status) -> None:
        with self._lock:
            record["status"] = status
            self.stats.by_status[status] += 1

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        with self._lock:
            self.stats.total += 1
            over = self.stats.total > self.max_requests
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
            record = {"body": body, "auth": request.headers.get("Authorization", ""), "status": None}
            self.stats.requests.append(record)
            action = "over" if over else self._decide()
            latency, hang_s, status = self.behaviour.latency_s, self.behaviour.hang_s, self.behaviour.error_status
        try:
            if action == "over":
                self._count(record, 503)
                return _error(503, "request limit of the test server reached")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                self._count(record, 400)
                return _error(400, "body must be a JSON object with messages")
            if latency > 0:
                await asyncio.sleep(latency)
            if action == "hang":
                self._count(record, "hang")
                try:
                    await asyncio.wait_for(self._stopping.wait(), hang_s)
                except asyncio.TimeoutError:
                    pass
                return _error(504, "hung")
            if action == "error":
                self._count(record, status)
                return _error(status, f"injected error {status}")
            prompt_text = "\n".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
            text = GARBAGE_REPLY if action == "garbage" else self.behaviour.rule(prompt_text)
            self._count(record, 200)
            return web.json_response(_completion(body.get("model", "judge"), prompt_text, text))
        finally:
            with self._lock:
                self.stats.in_flight -= 1


    async def _stats(self, request: web.Request) -> web.Response:
        """The counters as JSON, for a client in another process (e.g. the benchmark)."""
        with self._lock:
            st = self.stats
            return web.json_response({"total": st.total, "by_status": {str(k): v for k, v in st.by_status.items()},
                                      "in_flight": st.in_flight, "max_in_flight": st.max_in_flight})


    async def _reset_stats(self, request: web.Request) -> web.Response:
        self.reset_stats()
        return web.json_response({"ok": True})


def _error(status: int, message: str) -> web.Response:
    kind = {429: "rate_limit_error", 400: "invalid_request_error", 401: "authentication_error"}.get(status, "server_error")
    headers = {"Retry-After": "0"} if status == 429 else None
    return web.json_response({"error": {"message": message, "type": kind, "code": str(status)}}, status=status,
                             headers=headers)


def _completion(model: str, prompt_text: str, text: str) -> dict:
    prompt_tokens, completion_tokens = len(prompt_text.split()), len(text.split())
    return {
        "id": f"chatcmpl-test-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                     "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def main(rule: Callable[[str], str] | None = None, description: str | None = None) -> None:
    """Serve from a process of its own: prints ``PORT <n>``, then serves until stdin closes, SIGTERM, or
    ``--max-seconds`` pass (so a forgotten server never outlives its benchmark). A task passes its own grading
    ``rule`` (``python -m ao_calib_tasks.oracle.judge_server``); otherwise ``--rule`` picks one of :data:`RULES`."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=description or "OpenAI-compatible rule judge on 127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    if rule is None:
        parser.add_argument("--rule", choices=sorted(RULES), default="yes",
                            help="yes: the answer 'yes' scores 90, anything else 10")
    args = parser.parse_args()
    with JudgeServer(Behaviour(latency_s=args.latency, rule=rule or RULES[args.rule]), port=args.port) as server:
        print(f"PORT {server.port}", flush=True)
        done = threading.Event()

        def watch_stdin():
            sys.stdin.read()  # returns at EOF: the parent closed the pipe or exited
            done.set()

        threading.Thread(target=watch_stdin, daemon=True).start()
        done.wait(args.max_seconds)


if __name__ == "__main__":
    main()
