"""Write oracle probe questions for user prompts with an LLM, in the WildChat oracle-questions format.

    python -m ao_calib_tasks.oracle.make_questions --prompts prompts.jsonl --out questions.jsonl \\
        [--n-questions 8] [--model openai/gpt-4o-mini] [--api-base URL] [--max-concurrency 16] [--timeout-s 60] \\
        [--max-retries 3] [--cache-dir DIR] [--language-field language]

The oracle questions from WildChat prompts: for each prompt the LLM (through ``litellm.acompletion``) writes
N probe questions, about half yes/no questions whose answer is yes (true facts about the prompt's topic, intent or
emotion), about half probing a wrong topic or emotion (answer no), and a few open questions ("What is the main topic
of the message?"). The reply is a JSON list of strings; the first JSON array in it is taken (code fences and prose
around it are fine), its questions are stripped, de-duplicated and capped at N.

Input (``--prompts``): JSONL, or a JSON list, of rows with a ``prompt`` (or ``wildchat_question``) field and an
optional language field; or a plain text file with one prompt per line. Output (``--out``): JSONL, one object per
prompt, ``{"wildchat_question", "language", "oracle_questions", ...the row's other fields}``, which
``ao_calib_tasks.oracle.rows.files.load_wildchat`` reads; written atomically, in input order.

Limits are the judge's (``ao_calib.judges.litellm_judge``): at most ``--max-concurrency`` requests at once, a
timeout per request, and retries with exponential backoff on 429/5xx/timeouts/lost connections and on replies
with no usable question list. A prompt that still fails is reported and left out; the run goes on. Every finished
prompt goes to a disk cache at once (``--cache-dir``: one small JSON file per prompt, ``<dir>/<key[:2]>/<key>.json``
as in the judge's cache, written atomically), so a rerun makes no request for prompts already done.

API keys come only from the environment, read by litellm itself. With ``--api-base`` and no ``OPENAI_API_KEY``,
an ``openai/...`` model gets the placeholder key, as the judge does. litellm is imported lazily, with the bundled
model-cost map.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ao_calib.core.errors import AOCalibError
from ao_calib.judges.cache import KeyedFileCache
from ao_calib_tasks.oracle.question_files import (UNKNOWN_LANGUAGE, PromptRow, output_record, parse_questions,
                                                  read_prompts, write_jsonl_atomic)

log = logging.getLogger(__name__)

_CACHE_VERSION = 1
DEFAULT_MODEL = "openai/gpt-4o-mini"

DEFAULT_TEMPLATE = """\
You write probe questions for an "activation oracle": a model that reads another model's internal activations \
while it processes a user's message, and answers questions about that message.

The user's message{language_note}:
<message>
{prompt}
</message>

Write {n} short questions, in English, about this message:
- {n_yes} yes/no questions whose answer is YES: true facts about the message's topic, the user's intent or \
request, or its tone or emotion (e.g. "Is the user asking for help with code?", "Is the user frustrated?");
- {n_no} yes/no questions whose answer is NO: each probes a plausible but WRONG topic, intent or emotion \
(e.g. "Is this message about cooking?", "Is the user celebrating good news?");
- {n_open} open questions (e.g. "What is the main topic of the message?", "What does the user want?").
Each question must be answerable from the message alone. Mix their order.

Reply with only a JSON list of {n} strings."""


# --------------------------------------------------------------------------------------------- parsing

def question_key(model: str, request_text: str, n: int) -> str:
    """sha256 over the model, the full request text sent and N (the judge cache's key scheme, own namespace)."""
    payload = json.dumps([_CACHE_VERSION, "oracle_questions", model, request_text, n], ensure_ascii=False,
                         separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class QuestionCache(KeyedFileCache):
    """``get(key) -> list[str] | None`` and ``put(key, questions, raw)``: one JSON file per prompt, in the judge
    cache's layout (``ao_calib.judges.cache.KeyedFileCache``)."""

    def get(self, key: str) -> list[str] | None:
        entry = self.read(key)
        questions = None if entry is None else entry.get("oracle_questions")
        if not isinstance(questions, list) or not questions or not all(isinstance(q, str) and q.strip()
                                                                         for q in questions):
            return None
        return questions

    def put(self, key: str, questions: list[str], raw: str | None) -> None:
        self.write(key, oracle_questions=questions, raw=raw)


# --------------------------------------------------------------------------------------------- writer


@dataclass
class Summary:
    prompts: int = 0  # usable input rows
    bad_rows: int = 0  # input rows skipped as malformed
    unique: int = 0  # distinct requests (identical prompts are asked once)
    done: int = 0  # rows written to the output
    cached: int = 0  # distinct requests answered from the cache (no call)
    failed: int = 0  # rows left out: their request still failed after the retries
    calls: int = 0  # HTTP requests made, retries included
    retries: int = 0
    errors: int = 0  # requests that failed (status, timeout, connection)
    garbage: int = 0  # replies with no usable question list
    questions: int = 0  # questions written
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # "row I: why" per failed row
    bad: list = field(default_factory=list)  # one message per malformed input row

    def as_dict(self) -> dict:
        return asdict(self)

    def format(self) -> str:
        lines = [
            f"prompts: {self.prompts} ({self.unique} distinct), done: {self.done}, cached: {self.cached}, "
            f"failed: {self.failed}, bad input rows: {self.bad_rows}",
            f"questions: {self.questions}, calls: {self.calls} (retries {self.retries}, errors {self.errors}, "
            f"unusable replies {self.garbage})",
            f"tokens: {self.prompt_tokens} prompt + {self.completion_tokens} completion, "
            f"cost: ${self.cost_usd:.4f}, time: {self.seconds:.1f} s",
        ]
        lines += [f"failed: {f}" for f in self.failures]
        lines += [f"skipped: {b}" for b in self.bad]
        return "\n".join(lines)


@dataclass
class _Outcome:
    questions: list[str] | None
    cached: bool = False
    reason: str = ""


class QuestionWriter:
    """Asks an LLM for each prompt's probe questions; ``await write(rows)`` returns one ``_Outcome`` per row and
    adds to ``self.summary``."""

    def __init__(self, model: str = DEFAULT_MODEL, api_base: str | None = None, n_questions: int = 8,
                 max_concurrency: int = 16, timeout_s: float = 60.0, max_retries: int = 3, backoff_s: float = 1.0,
                 cache_dir: str | os.PathLike | None = None, temperature: float = 0.7, max_tokens: int = 1024,
                 min_questions: int = 1, max_prompt_chars: int = 6000, template: str = DEFAULT_TEMPLATE,
                 jitter: float = 0.1):
        if not model:
            raise AOCalibError("--model must name a litellm model, e.g. openai/gpt-4o-mini")
        if n_questions < 1 or not 1 <= min_questions <= n_questions:
            raise AOCalibError(f"need 1 <= min_questions <= n_questions (got {min_questions}, {n_questions})")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0 or max_prompt_chars < 1:
            raise AOCalibError("need max_concurrency >= 1, max_retries >= 0, timeout_s > 0, backoff_s >= 0 and "
                               f"max_prompt_chars >= 1 (got {max_concurrency}, {max_retries}, {timeout_s}, "
                               f"{backoff_s}, {max_prompt_chars})")
        from ao_calib.judges.requests import RetryingRequests, import_litellm

        self.model = model
        self.api_base = api_base or None
        self.n = int(n_questions)
        self.min_questions = int(min_questions)
        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.max_prompt_chars = int(max_prompt_chars)
        self.template = template
        self.cache = QuestionCache(cache_dir) if cache_dir else None
        self.summary = Summary()
        self._requests = RetryingRequests(import_litellm(), self.model, self.api_base, temperature=temperature,
                                          max_tokens=max_tokens, timeout_s=timeout_s, max_retries=max_retries,
                                          backoff_s=backoff_s, jitter=jitter, count=self._count)
        self.render("", UNKNOWN_LANGUAGE)  # a bad template fails here, not per prompt

    # ----------------------------------------------------------------------------------------- requests

    def split(self) -> tuple[int, int, int]:
        """(yes, no, open) question counts asked for: a few open ones, the rest half and half."""
        n_open = 0 if self.n < 3 else max(1, self.n // 4)
        n_no = (self.n - n_open) // 2
        return self.n - n_open - n_no, n_no, n_open

    def render(self, prompt: str, language: str) -> str:
        if len(prompt) > self.max_prompt_chars:
            prompt = prompt[:self.max_prompt_chars] + " [...]"
        n_yes, n_no, n_open = self.split()
        note = "" if not language or language == UNKNOWN_LANGUAGE else f" (language: {language})"
        try:
            return self.template.format(prompt=prompt, n=self.n, n_yes=n_yes, n_no=n_no, n_open=n_open,
                                        language_note=note, language=language or UNKNOWN_LANGUAGE)
        except (KeyError, IndexError, ValueError) as e:
            raise AOCalibError(f"the question template is not a valid format string: {e!r}") from None

    def _count(self, **counters) -> None:
        """The request counters this summary keeps (it keeps no latency or rate-limit wait: no caps here)."""
        for name, value in counters.items():
            if name not in ("latency", "rate_limited_wait_s"):
                setattr(self.summary, name, getattr(self.summary, name) + value)

    async def write(self, rows: Sequence[PromptRow], progress_every: int = 50) -> list[_Outcome]:
        """One outcome per row; identical requests are made once, cached ones not at all."""
        keys, texts = [], {}
        for row in rows:
            text = self.render(row.prompt, row.language)
            key = question_key(self.model, text, self.n)
            keys.append(key)
            texts.setdefault(key, text)
        outcomes: dict[str, _Outcome] = {}
        todo = []
        for key in texts:
            cached = self.cache.get(key) if self.cache is not None else None
            if cached is not None:
                outcomes[key] = _Outcome(cached[:self.n], cached=True)
            else:
                todo.append(key)
        s = self.summary
        s.prompts += len(rows)
        s.unique += len(texts)
        s.cached += len(texts) - len(todo)
        if todo:
            sem = asyncio.Semaphore(self.max_concurrency)
            finished = 0

            async def one(key: str) -> _Outcome:
                nonlocal finished
                outcome = await self._ask_and_store(key, texts[key], sem)
                finished += 1
                if progress_every and finished % progress_every == 0:
                    log.info("%d of %d prompts asked", finished, len(todo))
                return outcome

            for key, outcome in zip(todo, await asyncio.gather(*(one(k) for k in todo))):
                outcomes[key] = outcome
        results = [outcomes[k] for k in keys]
        for row, outcome in zip(rows, results):
            if outcome.questions:
                s.done += 1
                s.questions += len(outcome.questions)
            else:
                s.failed += 1
                preview = " ".join(row.prompt.split())
                preview = preview if len(preview) <= 60 else preview[:57] + "..."
                s.failures.append(f"row {row.index} ({preview!r}): {outcome.reason}")
        return results

    async def _ask_and_store(self, key: str, text: str, sem: asyncio.Semaphore) -> _Outcome:
        questions, raw, reason = await self._ask(text, sem)
        if questions and self.cache is not None:
            try:
                self.cache.put(key, questions, raw)
            except OSError as e:
                log.warning("question cache: could not write an entry (%s)", type(e).__name__)
        return _Outcome(questions, reason=reason)

    async def _ask(self, text: str, sem: asyncio.Semaphore) -> tuple[list[str] | None, str | None, str]:
        """One prompt's questions with retries (``ao_calib.judges.requests``): (questions, raw reply, "") or (None,
        None, why it failed)."""
        def usable(raw: str | None) -> list[str] | None:
            questions = parse_questions(raw, self.n)
            return questions if len(questions) >= self.min_questions else None

        return await self._requests.ask(text, usable, sem, unusable="reply without a usable JSON list of questions")


# --------------------------------------------------------------------------------------------- entry points


def make_questions(prompts: str | Path, out: str | Path, *, language_field: str = "language",
                   limit: int | None = None, **writer_kwargs) -> Summary:
    """Reads ``prompts``, asks for each prompt's questions, writes ``out`` (atomically) and returns the summary.
    ``writer_kwargs`` go to :class:`QuestionWriter`. Prompts that fail are left out and listed in the summary."""
    start = time.perf_counter()
    rows, bad = read_prompts(prompts, language_field)
    for message in bad:
        log.warning("skipped bad row: %s", message)
    if limit is not None:
        rows = rows[:max(0, limit)]
    writer = QuestionWriter(**writer_kwargs)
    outcomes = asyncio.run(writer.write(rows)) if rows else []
    records = [output_record(row, o.questions) for row, o in zip(rows, outcomes) if o.questions]
    write_jsonl_atomic(out, records)
    summary = writer.summary
    summary.bad_rows, summary.bad = len(bad), list(bad)
    summary.seconds = time.perf_counter() - start
    for failure in summary.failures:
        log.warning("prompt failed and is left out: %s", failure)
    return summary


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ao_calib_tasks.oracle.make_questions",
        description="Write oracle probe questions for prompts with an LLM (WildChat oracle-questions JSONL).")
    p.add_argument("--prompts", required=True, help="JSONL/JSON rows with 'prompt' (or 'wildchat_question'), "
                                                    "or a .txt file with one prompt per line")
    p.add_argument("--out", required=True, help="output JSONL (WildChat oracle-questions format)")
    p.add_argument("--n-questions", type=int, default=8, help="questions per prompt (default 8)")
    p.add_argument("--min-questions", type=int, default=1,
                   help="a reply with fewer usable questions is retried (default 1)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"litellm model (default {DEFAULT_MODEL})")
    p.add_argument("--api-base", default=None, help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--max-concurrency", type=int, default=16)
    p.add_argument("--timeout-s", type=float, default=60.0, help="per request")
    p.add_argument("--max-retries", type=int, default=3)
    p.add_argument("--backoff-s", type=float, default=1.0, help="first retry's delay; doubles each retry")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--max-prompt-chars", type=int, default=6000, help="longer prompts are cut in the request")
    p.add_argument("--cache-dir", default=None, help="reruns make no request for prompts already done")
    p.add_argument("--language-field", default="language", help="the input field with the prompt's language")
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    p.add_argument("--summary-json", default=None, help="also write the summary to this JSON file")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s")
    if not args.verbose:
        for name in ("LiteLLM", "litellm", "httpx", "openai", "aiohttp"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        summary = make_questions(
            args.prompts, args.out, language_field=args.language_field, limit=args.limit, model=args.model,
            api_base=args.api_base, n_questions=args.n_questions, min_questions=args.min_questions,
            max_concurrency=args.max_concurrency, timeout_s=args.timeout_s, max_retries=args.max_retries,
            backoff_s=args.backoff_s, cache_dir=args.cache_dir, temperature=args.temperature,
            max_tokens=args.max_tokens, max_prompt_chars=args.max_prompt_chars)
    except AOCalibError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary.format())
    print(f"wrote {summary.done} prompts to {args.out}")
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    # 0 when something was written (or there was nothing to do); 1 when every prompt failed.
    return 1 if summary.prompts and not summary.done else 0


if __name__ == "__main__":
    sys.exit(main())
