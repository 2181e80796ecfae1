"""Offline oracle data: user prompts with yes/no probe questions whose answers are known by construction.

Each prompt asks for help with a task from one topic, carries a positive or negative mood, and usually names a
city. Questions probe the topic, the mood and the city; about half are about something the prompt is not
(a wrong topic, the opposite mood, another city), so about half the answers are No.
"""

from __future__ import annotations

import random
import re

TOPICS: dict[str, list[str]] = {
    "cooking": ["bake sourdough bread", "cook a creamy pasta sauce", "make a spicy lentil soup", "roast a whole chicken",
                "grill vegetables for dinner", "fry crispy eggs", "bake chocolate cookies", "season a cast iron pan"],
    "programming": ["fix a bug in my Python script", "write a JavaScript function that sorts a list",
                    "debug a segfault in my C program", "speed up a slow SQL query", "set up unit tests for my code",
                    "refactor a messy Java class", "read a JSON file in Python", "learn recursion in Haskell"],
    "sports": ["train for a marathon", "improve my tennis serve", "get better at basketball free throws",
               "build stamina for football season", "learn to swim butterfly", "prepare for a cycling race",
               "warm up before a soccer match", "pick running shoes for a half marathon"],
    "travel": ["plan a week in Japan", "book a cheap flight to Spain", "pack for a hiking trip in the Alps",
               "find a hotel near the beach", "get a visa for a trip abroad", "plan a road trip across the country",
               "choose a travel insurance plan", "see the sights in Rome in two days"],
    "music": ["learn chords on the guitar", "write lyrics for a love song", "tune my piano", "practice singing scales",
              "record a song at home", "learn to read sheet music", "choose a first violin", "mix a drum track"],
    "health": ["sleep better at night", "lower my blood pressure", "treat a bad headache", "eat more vegetables",
               "recover from a cold", "reduce back pain from sitting", "start a meditation habit",
               "drink more water every day"],
    "finance": ["save money for retirement", "pay off my credit card debt", "invest in index funds",
                "make a monthly budget", "file my taxes", "build an emergency fund", "compare mortgage rates",
                "start a savings account for my kids"],
    "gardening": ["grow tomatoes on my balcony", "prune my rose bushes", "plant tulip bulbs in autumn",
                  "keep slugs away from lettuce", "start a compost pile", "water succulents properly",
                  "grow herbs indoors", "fix yellow leaves on my plants"],
}
TEMPLATES = ["How do I {task}?", "Can you help me {task}?", "I want to {task}. Any tips?",
             "What is the best way to {task}?", "Please explain how to {task}.", "Give me a simple plan to {task}."]
MOODS = {
    "positive": ["I'm so excited about this!", "I love doing this, it makes me happy.", "Great news, I finally have time!",
                 "This is going to be wonderful."],
    "negative": ["I'm really frustrated right now.", "This is awful and I hate it.", "I'm so stressed and upset.",
                 "Honestly I feel terrible about this."],
}
CITIES = ["Paris", "Tokyo", "Berlin", "Cairo", "Toronto", "Sydney", "Madrid", "Seoul", "Lima", "Oslo"]
KINDS = ("topic", "mood", "city")


def make_prompt(rng: random.Random) -> dict:
    topic = rng.choice(sorted(TOPICS))
    mood = rng.choice(sorted(MOODS))
    city = rng.choice(CITIES) if rng.random() < 0.75 else None
    parts = [rng.choice(TEMPLATES).format(task=rng.choice(TOPICS[topic])), rng.choice(MOODS[mood])]
    if city:
        parts.append(f"I live in {city}.")
    return {"prompt": " ".join(parts), "topic": topic, "mood": mood, "city": city}


def make_question(facts: dict, kind: str, rng: random.Random) -> tuple[str, str]:
    """A (question, "Yes"|"No") pair about one fact; the answer is Yes with probability 1/2."""
    yes = rng.random() < 0.5
    if kind == "topic":
        topic = facts["topic"] if yes else rng.choice([t for t in sorted(TOPICS) if t != facts["topic"]])
        return f"Is this text about {topic}?", "Yes" if yes else "No"
    if kind == "mood":
        mood = facts["mood"] if yes else ("negative" if facts["mood"] == "positive" else "positive")
        return f"Is the user in a {mood} mood?", "Yes" if yes else "No"
    if kind == "city":
        # A quarter of prompts name no city, so a named city is asked about 2/3 of the time: Yes stays near 1/2.
        own = facts["city"] is not None and rng.random() < 2 / 3
        city = facts["city"] if own else rng.choice([c for c in CITIES if c != facts["city"]])
        return f"Does the text mention {city}?", "Yes" if own else "No"
    raise ValueError(f"unknown question kind {kind!r}; choose from {KINDS}")


def generate_rows(n_prompts: int, questions_per_prompt: int, kinds: tuple[str, ...] | list[str], seed: int,
                  prompt_offset: int = 0) -> list[dict]:
    """``n_prompts`` distinct prompts, each with ``questions_per_prompt`` questions of the given kinds."""
    rng = random.Random(seed)
    rows, seen = [], set()
    while len(seen) < n_prompts:
        facts = make_prompt(rng)
        if facts["prompt"] in seen:
            continue
        seen.add(facts["prompt"])
        for q in range(questions_per_prompt):
            question, answer = make_question(facts, kinds[q % len(kinds)], rng)
            rows.append({"prompt": facts["prompt"], "question": question, "answer": answer,
                         "kind": kinds[q % len(kinds)], "prompt_id": prompt_offset + len(seen) - 1})
    return rows


def generate_splits(n_train_prompts: int, n_test_prompts: int, questions_per_prompt: int, kinds, seed: int
                    ) -> tuple[list[dict], list[dict]]:
    """Train and test rows over disjoint prompts."""
    both = generate_rows(n_train_prompts + n_test_prompts, questions_per_prompt, tuple(kinds), seed)
    test_ids = set(range(n_train_prompts, n_train_prompts + n_test_prompts))
    return [r for r in both if r["prompt_id"] not in test_ids], [r for r in both if r["prompt_id"] in test_ids]


def true_answer(text: str, question: str) -> str | None:
    """The answer ("Yes"/"No") to one of ``make_question``'s questions about a prompt made by ``make_prompt``, read
    from the text alone (what a judge does); None for a question of another form."""
    for pattern, holds in (
        (r"Is this text about (\w+)\?", lambda x: any(t in text for t in TOPICS.get(x, []))),
        (r"Is the user in a (\w+) mood\?", lambda x: any(m in text for m in MOODS.get(x, []))),
        (r"Does the text mention (\w+)\?", lambda x: f"I live in {x}." in text),
    ):
        found = re.search(pattern, question)
        if found:
            return "Yes" if holds(found.group(1)) else "No"
    return None
