"""Generate function-calling rows in the task's JSONL format.

A row is one of three kinds, chosen at random:

* single: one call, optional arguments present iff the query mentions them;
* multi: the same function called 2-4 times with different values of one
  argument ("What are the factorials of 5, 7 and 10?");
* compound: two different functions, one query each, joined into one message.

The prompt lists the needed function(s) plus distractors (2-5 in all, shuffled).
Everything is driven by one seeded ``random.Random``, so the same seed always
gives the same rows.

CLI: ``python -m ao_calib_tasks.function_call.generate --out DIR --n N [--test-n M] [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .schemas import SCHEMAS, Param, Schema

SYSTEM = "You are a helpful assistant with access to the following functions. Use them if required.\n\n"
SOURCE = "ao_calib_generated"
CONNECTORS = ("{a} Also: {b}", "{a} After that: {b}", "Two things. First: {a} Second: {b}", "{a}\n{b}",
              "{a} And one more thing: {b}")
# Sentences around a request that change nothing in its answer (:func:`with_context`). They name no value any
# parameter takes, so every value in the query is still one the answer uses.
CONTEXT_LEADS = (
    "I'm putting together a short report for my team and I need a few figures for it.",
    "This is for a school project I'm working on this week.",
    "My manager asked me to check this before tomorrow's meeting, so it has to be right.",
    "I've been trying to sort this out all morning and could use some help.",
    "We're planning ahead and want to get the details right before we decide anything.",
    "A friend of mine asked me about this and I promised to find out.",
    "I'm comparing a few options at the moment and need exact answers.",
    "Quick question, since I'm in a bit of a hurry today.",
    "I'm new to this and not sure where to start, so bear with me.",
    "For a presentation I'm preparing, I need some information.",
    "I keep a spreadsheet of these things and want to fill in the missing entries.",
    "Our group has been debating this for a while and we'd like a clear answer.",
)
CONTEXT_CLOSINGS = ("Thanks in advance for your help!", "Please use exactly the values I gave.",
                    "Let me know what you find.", "I appreciate it.", "It would help a lot to have this today.")


def with_context(query: str, rng: random.Random) -> str:
    """``query`` inside one or two sentences of context, sometimes a closing line, sometimes in quotation marks, as
    many real requests (and BFCL's longer queries) are written; the request, and so its answer, is unchanged."""
    lead = " ".join(rng.sample(CONTEXT_LEADS, rng.randint(1, 2)))
    text = lead + rng.choice((" ", "\n\n")) + query
    if rng.random() < 0.4:
        text += " " + rng.choice(CONTEXT_CLOSINGS)
    return f'"{text}"' if rng.random() < 0.2 else text


def py_literal(value: Any) -> str:
    """Python source for a literal value; strings use double quotes (JSON escaping is valid Python)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return repr(value)


def format_call(name: str, args: dict[str, Any]) -> str:
    """``name(arg=value, ...)`` as it appears in the ``answer`` field."""
    return f"{name}(" + ", ".join(f"{k}={py_literal(v)}" for k, v in args.items()) + ")"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def display(param: Param, value: Any) -> str:
    """How a value is written inside a natural-language query."""
    if isinstance(value, bool):
        assert param.phrases is not None, "bool parameters need phrases"
        return param.phrases[int(value)]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return _join([display(param, v) for v in value])
    return str(value)


def _ordered(schema: Schema, args: dict[str, Any]) -> dict[str, Any]:
    return {k: args[k] for k in schema.parameters if k in args}


def single_call(schema: Schema, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """One query and its one call; picks a template group, which fixes the optional args used."""
    optional = rng.choice(sorted(schema.templates))
    names = schema.required + list(optional)
    args = _ordered(schema, {k: schema.parameters[k].sample(rng) for k in names})
    template = rng.choice(schema.templates[optional])
    text = template.format(**{k: display(schema.parameters[k], v) for k, v in args.items()})
    return text, [args]


def _distinct(draw: Callable[[], Any], want: int, tries: int = 50) -> list[Any]:
    """Up to ``want`` distinct results of ``draw``, in the order drawn (a small pool may give fewer)."""
    found: list[Any] = []
    for _ in range(tries):
        value = draw()
        if value not in found:
            found.append(value)
        if len(found) == want:
            break
    return found


def multi_call(schema: Schema, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """One query asking for the same function on 2-4 distinct values of ``schema.multi_arg``."""
    key = schema.multi_arg
    assert key is not None
    param = schema.parameters[key]
    base = {k: schema.parameters[k].sample(rng) for k in schema.required}
    values = _distinct(lambda: param.sample(rng), rng.randint(2, 4))
    calls = [_ordered(schema, {**base, key: v}) for v in values]
    shown = {k: display(schema.parameters[k], v) for k, v in base.items()}
    shown[key] = _join([display(param, v) for v in values])
    return rng.choice(schema.multi_templates).format(**shown), calls


def _calls_of_their_own(schema: Schema, rng: random.Random) -> list[dict[str, Any]]:
    """2-4 distinct calls of one function, every required argument drawn anew for each (functions with
    ``call_phrases``: :mod:`.synthetic`)."""
    assert schema.call_phrases, "a call of its own needs a function with call_phrases (synthetic.py)"
    return _distinct(lambda: _ordered(schema, {k: schema.parameters[k].sample(rng) for k in schema.required}),
                     rng.randint(2, 4))


def _call_clause(schema: Schema, call: dict[str, Any]) -> str:
    """One call's arguments in words, in the function's phrases ("in Tokyo for the year 1999")."""
    return " ".join(p.format(**{k: display(schema.parameters[k], v) for k, v in call.items()})
                    for p in schema.call_phrases)


def each_call(schema: Schema, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """2-4 calls of one function, every required argument drawn anew for each call, as BFCL's parallel queries
    are written: one clause a call ("in Paris for the year 2001; and in Tokyo for the year 1999") or one phrase an
    argument with its values in call order ("in Paris and Tokyo for the year 2001 and 1999, respectively")."""
    calls = _calls_of_their_own(schema, rng)
    opener = rng.choice(schema.openers)
    if rng.random() < 0.5:
        clauses = [_call_clause(schema, c) for c in calls]
        text = "; ".join(clauses[:-1]) + "; and " + clauses[-1]
    else:
        values = {k: _join([display(schema.parameters[k], c[k]) for c in calls]) for k in schema.required}
        text = " ".join(p.format(**values) for p in schema.call_phrases) + ", respectively"
    return opener.format(calls=text), calls


# A parallel query told as a short story (:func:`story_call`): the request, and one sentence a call
COUNT_WORDS = ("one", "two", "three", "four")
ORDINALS = ("first", "second", "third", "fourth")
STORY_INTROS = ("I have {n} cases to check.", "We are comparing {n} different setups.",
                "There are {n} situations I need to look at.", "My team sent me {n} requests this morning.",
                "Here are {n} scenarios from our planning meeting.")
STORY_LINES = ("The {nth} one is {args}.", "In the {nth} case, it is {args}.", "For the {nth}, it's {args}.",
               "The {nth} scenario is {args}.")
STORY_ASKS = ("for each of them", "for all {n} of them", "for each one", "for every one of these")


def story_call(schema: Schema, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """2-4 calls of one function, every required argument drawn anew for each call, told as BFCL's longer parallel
    queries are: one sentence a call ("The second one is in Tokyo for the year 1999."), the request before them
    ("Can you get the population for each of them? The first one is ...") or after an opening line."""
    calls = _calls_of_their_own(schema, rng)
    count = COUNT_WORDS[len(calls) - 1]
    line = rng.choice(STORY_LINES)
    lines = [line.format(nth=ORDINALS[i], args=_call_clause(schema, call)) for i, call in enumerate(calls)]
    ask = rng.choice(schema.openers).format(calls=rng.choice(STORY_ASKS).format(n=count))
    parts = [ask, *lines] if rng.random() < 0.5 else [rng.choice(STORY_INTROS).format(n=count), *lines, ask]
    return " ".join(parts), calls


def make_row(rng: random.Random, library: Sequence[Schema] = SCHEMAS, each: float = 0.0,
             each_rng: random.Random | None = None, story: float = 0.0,
             story_rng: random.Random | None = None) -> dict[str, Any]:
    """One complete row in the task's format, its functions drawn from ``library``. ``each``: the share of
    one-function parallel queries (of functions that allow it) written by :func:`each_call`, decided by
    ``each_rng``; ``story``: the share of the others written by :func:`story_call`, decided by ``story_rng``; with
    both 0 the rows are the ones ``rng`` always gave."""
    if (each and each_rng is None) or (story and story_rng is None):
        raise ValueError("make_row: each > 0 or story > 0 needs its own draws (each_rng, story_rng), which pick the "
                         "queries written that way")
    kind = rng.random()
    multi_capable = [s for s in library if s.multi_arg]
    if kind < 0.2:
        schema = rng.choice(multi_capable)
        if each and schema.call_phrases and each_rng.random() < each:
            query, args = each_call(schema, rng)
        elif story and schema.call_phrases and story_rng.random() < story:
            query, args = story_call(schema, rng)
        else:
            query, args = multi_call(schema, rng)
        calls = [(schema, a) for a in args]
    elif kind < 0.35:
        first, second = rng.sample(library, 2)
        qa, aa = single_call(first, rng)
        qb, ab = single_call(second, rng)
        query = rng.choice(CONNECTORS).format(a=qa, b=qb)
        calls = [(first, aa[0]), (second, ab[0])]
    else:
        schema = rng.choice(library)
        query, args = single_call(schema, rng)
        calls = [(schema, args[0])]

    needed = list(dict.fromkeys(s.name for s, _ in calls))
    others = [s for s in library if s.name not in needed]
    total = rng.randint(max(2, len(needed)), 5)
    shown = [s for s in library if s.name in needed] + rng.sample(others, total - len(needed))
    rng.shuffle(shown)
    prompt = SYSTEM + json.dumps([s.definition() for s in shown], indent=2) + "\n\n" + query
    primary = calls[0][0].name
    return {
        "prompt": prompt,
        "answer": "\n".join(format_call(s.name, a) for s, a in calls),
        "type": "tool_call",
        "ground_truth": primary,
        "ground_truth_text": primary,
        "possible_boxed_answers": [s.name for s in shown],
        "is_multi_answer": len(calls) > 1,
        "confidence": 1.0,
        "source": SOURCE,
    }


def generate_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` rows; deterministic in ``seed``."""
    rng = random.Random(seed)
    return [make_row(rng) for _ in range(n)]


def generate_splits(n_train: int, n_test: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Train and test rows from separate random streams; no prompt appears in both.

    Test rows are drawn first; train draws whose prompt is already in the test
    split are skipped (and redrawn), so evaluation never scores a memorised prompt.
    """
    test = generate_rows(n_test, seed=hash_seed(seed, "test"))
    held_out = {r["prompt"] for r in test}
    rng = random.Random(hash_seed(seed, "train"))
    train: list[dict[str, Any]] = []
    for _ in range(50 * n_train + 1000):
        if len(train) == n_train:
            break
        row = make_row(rng)
        if row["prompt"] not in held_out:
            train.append(row)
    if len(train) < n_train:
        raise RuntimeError(f"could only draw {len(train)} train rows disjoint from the test split")
    return train, test


def hash_seed(seed: int, tag: str) -> int:
    """A stable derived seed (unlike ``hash()``, the same in every process)."""
    return random.Random(f"{seed}/{tag}").getrandbits(64)


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate Python-style function-calling data.")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--n", required=True, type=int, help="number of train rows")
    parser.add_argument("--test-n", type=int, default=None, help="number of test rows (default max(20, N//10))")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.n < 0 or (args.test_n is not None and args.test_n < 0):
        parser.error("row counts must be non-negative")
    test_n = args.test_n if args.test_n is not None else max(20, args.n // 10)
    train, test = generate_splits(args.n, test_n, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(train, args.out / "train.jsonl")
    write_jsonl(test, args.out / "test.jsonl")
    print(f"wrote {len(train)} train rows to {args.out / 'train.jsonl'}")
    print(f"wrote {len(test)} test rows to {args.out / 'test.jsonl'}")


if __name__ == "__main__":
    main()
