"""Small, deterministic text corpus for training the tiny models' BPE tokenizers.

The texts only need to cover what tests and the offline quickstart feed the tokenizer
(English prompts, JSON tool calls, Python-style calls, numbers, the oracle prompt markers),
so that a 4k-vocab BPE produces sensible merges instead of falling back to single bytes.
Everything is generated from fixed word lists with a fixed seed: the same code gives the
same corpus, and the corpus text is part of the tiny-model cache key.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

_SEED = 1234

_SUBJECTS = ["the cat", "a student", "my neighbour", "the engineer", "our team", "the old man",
             "a small robot", "the teacher", "every child", "the model", "a careful reader", "the pilot"]
_VERBS = ["reads", "writes", "finds", "builds", "explains", "measures", "paints", "checks",
          "answers", "counts", "remembers", "forgets"]
_OBJECTS = ["a long letter", "the answer", "three red apples", "the weather report", "a new bridge",
            "the final score", "an old map", "the hidden layer", "a short poem", "the train schedule",
            "the capital city", "a simple proof"]
_PLACES = ["in the morning", "after lunch", "near the river", "at the station", "in Paris", "in Tokyo",
           "on Monday", "before the exam", "during the storm", "at home"]
_CITIES = ["Paris", "London", "Berlin", "Tokyo", "Madrid", "Rome", "Cairo", "Lima", "Oslo", "Seoul",
           "Ottawa", "Canberra"]
_COUNTRIES = ["France", "the United Kingdom", "Germany", "Japan", "Spain", "Italy", "Egypt", "Peru",
              "Norway", "South Korea", "Canada", "Australia"]
_ADJECTIVES = ["quick", "quiet", "bright", "heavy", "simple", "strange", "certain", "uncertain",
               "careful", "large", "small", "useful"]

_QUESTIONS = [
    ("What is the capital of {country}?", "The capital of {country} is {city}."),
    ("Is {city} a city in {country}? Answer with 'Yes' or 'No' only.", "{yesno}"),
    ("What is {a} plus {b}?", "{a} plus {b} is {sum}."),
    ("What is {a} times {b}?", "{a} times {b} is {prod}."),
    ("How confident are you that {subj} {verb} {obj}?", "[epistemic status: {conf}] I think so."),
    ("Describe something {adj}.", "Something {adj} is {obj} {place}."),
]

_ORACLE_LINES = [
    "Layer: {layer}",
    "Layer: {layer} ? Is the model thinking about {obj}?",
    "[epistemic status: {conf}]",
    "[epistemic status: {conf}] Yes",
    "[epistemic status: {conf}] No",
    "Answer with 'Yes' or 'No' only.",
    " ? ? ?",
]


def _sentences(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_PLACES)}."
        out.append(s[0].upper() + s[1:])
    return out


def _qa(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        q, a = rng.choice(_QUESTIONS)
        i = rng.randrange(len(_CITIES))
        x, y = rng.randint(0, 99), rng.randint(0, 99)
        fields = {
            "country": _COUNTRIES[i], "city": _CITIES[i if rng.random() < 0.5 else rng.randrange(len(_CITIES))],
            "a": x, "b": y, "sum": x + y, "prod": x * y, "conf": rng.randint(0, 100),
            "subj": rng.choice(_SUBJECTS), "verb": rng.choice(_VERBS), "obj": rng.choice(_OBJECTS),
            "adj": rng.choice(_ADJECTIVES), "place": rng.choice(_PLACES),
        }
        fields["yesno"] = "Yes" if fields["city"] == _CITIES[i] else "No"
        out.append(f"Question: {q.format(**fields)}\nAnswer: {a.format(**fields)}")
    return out


def _tool_json(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        a, b, c = rng.randint(1, 20), rng.randint(1, 20), rng.randint(1, 20)
        expr = rng.choice([f"{a}*({b}+{c})", f"{a}+{b}*{c}", f"({a}-{b})/{c}", f"{a}**2+{b}"])
        city = rng.choice(_CITIES)
        out.append(json.dumps({"tool": "calculator", "args": {"expression": expr}}))
        out.append(json.dumps({"tool": "get_weather", "args": {"city": city, "unit": rng.choice(["celsius", "fahrenheit"])}}))
        out.append(json.dumps({"tool": "search", "args": {"query": f"capital of {rng.choice(_COUNTRIES)}"}}))
        out.append(json.dumps({"final": rng.choice([city, str(a * (b + c)), "Yes", "No"])}))
    return out


def _python_calls(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        city = rng.choice(_CITIES)
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        out.append(f'get_weather(city="{city}", unit="{rng.choice(["celsius", "fahrenheit"])}")')
        out.append(f"add(a={a}, b={b})  # returns {a + b}")
        out.append(f'send_email(to="team@example.com", subject="Report {a}", body="See attached.")')
        out.append(f'lookup_capital(country="{rng.choice(_COUNTRIES)}")')
    return out


def _arithmetic(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 9999), rng.randint(1, 99)
        out.append(f"{a} + {b} = {a + b}; {a} - {b} = {a - b}; {a} * {b} = {a * b}; {a} // {b} = {a // b}")
    out.append(" ".join(str(i) for i in range(200)))
    return out


def _oracle(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_ORACLE_LINES).format(layer=rng.randint(0, 63), conf=rng.randint(0, 100),
                                             obj=rng.choice(_OBJECTS)) for _ in range(n)]


def _function_call_texts() -> list[str]:
    # Function-calling prompts and calls, as the function_call task's generator writes them (seed 0, 200 rows),
    # kept as data here so the framework never imports a task. Part of the corpus, and so of the cache key.
    return json.loads((Path(__file__).with_name("corpus_function_calls.json")).read_text(encoding="utf-8"))


def corpus_texts() -> list[str]:
    """Return the deterministic list of training texts for the tiny tokenizers."""
    rng = random.Random(_SEED)
    texts: list[str] = []
    texts += _sentences(rng, 300)
    texts += _qa(rng, 300)
    texts += _tool_json(rng, 60)
    texts += _python_calls(rng, 60)
    texts += _arithmetic(rng, 60)
    texts += _oracle(rng, 100)
    texts += _function_call_texts()
    return texts
