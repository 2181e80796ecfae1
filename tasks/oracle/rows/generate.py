"""Offline oracle data: user prompts with yes/no probe questions whose answers are known by construction.

Each prompt asks for help with a task from one topic, carries a positive or negative mood, and usually names a
city. Questions probe the topic, the mood and the city; about half are about something the prompt is not
(a wrong topic, the opposite mood, another city), so about half the answers are No.

With ``stated_fraction`` below 1, each prompt's topic and mood are drawn as always but each is written into the
text only with that probability: an unstated topic leaves a request that names none ("How do I get this project
finished?"), an unstated mood a neutral sentence in the mood sentence's place ("I read about it last week."), of
about the same length, so that a prompt's length does not say which facts it states (``length_matched``; without
it, the earlier prompts: a fixed vague request, no sentence for an unstated mood). The question about an unstated
fact keeps its answer (the drawn fact), which nothing in the text, and so nothing in the activations, holds: the
same question text is readable on one prompt and a coin flip on another, and only the activations tell which
(``readable`` in each row). ``phrasings`` > 1 asks each question in one of several wordings, so that a rule reading
the question text has many distinct texts to learn from and no wording gives the answer away.
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
# A request that names no topic, for a prompt whose topic is not stated.
VAGUE_TASKS = ["Can you help me with this project?", "How do I get started with this?", "I need some advice.",
               "What should I do first?", "Please give me a simple plan.", "Any tips for a beginner like me?"]
# With length_matched (the default): an unstated topic is a task that names none, asked in the stated topics'
# own templates, and an unstated mood leaves a neutral sentence in the mood sentence's place. Word counts match the
# topics' tasks (3-8 words) and the mood sentences (5-8), so that a prompt's length (with positions=full, the number
# of activation vectors the oracle gets) does not tell whether it states a fact: before, it did (length against
# readability: AUROC 0.85 over the rows of oracle_smollm2's seed-42 validation split, 0.97 for mood questions).
VAGUE_TOPIC_TASKS = ["get this project finished", "sort out this problem", "finish what I started last week",
                     "make progress on my plan", "do this the right way", "start the thing I keep putting off",
                     "deal with this before Friday", "get this done properly", "get better at this",
                     "figure out the next step of this"]
NEUTRAL_SENTENCES = ["I am writing this from my desk.", "I read about it last week.", "My neighbour told me to ask.",
                     "I will try it this weekend.", "It came up at work on Monday.", "I have an hour this afternoon.",
                     "This is my first question here.", "A colleague mentioned it to me."]
# Wordings of each question (the first is the original one); {x} is the topic, the mood word, or the city.
TOPIC_QUESTIONS = ["Is this text about {x}?", "Is the user asking about {x}?", "Does this request concern {x}?",
                   "Is {x} the subject here?"]
MOOD_WORDS = {"positive": ["positive", "happy", "cheerful"], "negative": ["negative", "upset", "unhappy"]}
MOOD_QUESTIONS = ["Is the user in a {x} mood?", "Does the user sound {x}?", "Is the writer feeling {x}?"]
CITY_QUESTIONS = ["Does the text mention {x}?", "Is {x} named in the text?"]
# Open questions whose answer is the fact itself (the topic, "positive"/"negative", the city): asked only in the
# SFT warm-up (task.warmup_rows.open_fraction), where they teach the oracle to read before it compares.
# The answer to an open question about a fact the prompt does not state (task.warmup_rows.open_unstated): what the
# text says.
NOT_STATED = "not stated"
OPEN_QUESTIONS = {"topic": ["What is this text about?", "What topic is the user asking about?",
                            "Which subject does this request concern?"],
                  "mood": ["What is the user's mood?", "How does the user feel?", "What mood is the writer in?"],
                  "city": ["Which city does the text mention?", "Where does the user live?"]}
CITIES = ["Paris", "Tokyo", "Berlin", "Cairo", "Toronto", "Sydney", "Madrid", "Seoul", "Lima", "Oslo"]
KINDS = ("topic", "mood", "city")


def make_prompt(rng: random.Random, stated_fraction: float = 1.0, length_matched: bool = True) -> dict:
    topic = rng.choice(sorted(TOPICS))
    mood = rng.choice(sorted(MOODS))
    city = rng.choice(CITIES) if rng.random() < 0.75 else None
    # drawn only when some facts go unstated, so that stated_fraction=1 gives the prompts it always gave
    topic_stated = stated_fraction >= 1 or rng.random() < stated_fraction
    mood_stated = stated_fraction >= 1 or rng.random() < stated_fraction
    if topic_stated:
        request = rng.choice(TEMPLATES).format(task=rng.choice(TOPICS[topic]))
    elif length_matched:
        request = rng.choice(TEMPLATES).format(task=rng.choice(VAGUE_TOPIC_TASKS))
    else:
        request = rng.choice(VAGUE_TASKS)
    parts = [request]
    if mood_stated:
        parts.append(rng.choice(MOODS[mood]))
    elif length_matched:
        parts.append(rng.choice(NEUTRAL_SENTENCES))
    if city:
        parts.append(f"I live in {city}.")
    return {"prompt": " ".join(parts), "topic": topic, "mood": mood, "city": city,
            "readable": {"topic": topic_stated, "mood": mood_stated, "city": True}}


def make_question(facts: dict, kind: str, rng: random.Random, phrasings: int = 1) -> tuple[str, str]:
    """A (question, "Yes"|"No") pair about one fact; the answer is Yes with probability 1/2. With ``phrasings`` >
    1 the question takes one of the first ``phrasings`` wordings of its kind (a mood in one of its words)."""
    yes = rng.random() < 0.5

    def worded(forms: list[str], x: str) -> str:
        return (forms[rng.randrange(min(phrasings, len(forms)))] if phrasings > 1 else forms[0]).format(x=x)

    if kind == "topic":
        topic = facts["topic"] if yes else rng.choice([t for t in sorted(TOPICS) if t != facts["topic"]])
        return worded(TOPIC_QUESTIONS, topic), "Yes" if yes else "No"
    if kind == "mood":
        mood = facts["mood"] if yes else ("negative" if facts["mood"] == "positive" else "positive")
        word = rng.choice(MOOD_WORDS[mood]) if phrasings > 1 else mood
        return worded(MOOD_QUESTIONS, word), "Yes" if yes else "No"
    if kind == "city":
        # A quarter of prompts name no city, so a named city is asked about 2/3 of the time: Yes stays near 1/2.
        own = facts["city"] is not None and rng.random() < 2 / 3
        city = facts["city"] if own else rng.choice([c for c in CITIES if c != facts["city"]])
        return worded(CITY_QUESTIONS, city), "Yes" if own else "No"
    raise ValueError(f"unknown question kind {kind!r}; choose from {KINDS}")


def open_question(kind: str, rng: random.Random, phrasings: int = 1) -> str:
    """An open question about one kind of fact ("What is the user's mood?"), in one of the first ``phrasings``
    wordings; its answer is the row's ``fact``."""
    if kind not in OPEN_QUESTIONS:
        raise ValueError(f"unknown question kind {kind!r}; choose from {KINDS}")
    forms = OPEN_QUESTIONS[kind]
    return forms[rng.randrange(min(phrasings, len(forms)))]


def generate_rows(n_prompts: int, questions_per_prompt: int, kinds: tuple[str, ...] | list[str], seed: int,
                  prompt_offset: int = 0, stated_fraction: float = 1.0, phrasings: int = 1,
                  length_matched: bool = True) -> list[dict]:
    """``n_prompts`` distinct prompts, each with ``questions_per_prompt`` questions of the given kinds. Each row
    says whether the fact it asks about is written in the prompt (``readable``) and what that fact is (``fact``:
    the topic, the mood, or the city, None for a prompt that names none)."""
    rng = random.Random(seed)
    rows, seen = [], set()
    while len(seen) < n_prompts:
        facts = make_prompt(rng, stated_fraction, length_matched)
        if facts["prompt"] in seen:
            continue
        seen.add(facts["prompt"])
        for q in range(questions_per_prompt):
            kind = kinds[q % len(kinds)]
            question, answer = make_question(facts, kind, rng, phrasings)
            rows.append({"prompt": facts["prompt"], "question": question, "answer": answer, "kind": kind,
                         "readable": facts["readable"][kind], "fact": facts[kind],
                         "prompt_id": prompt_offset + len(seen) - 1})
    return rows


def generate_splits(n_train_prompts: int, n_test_prompts: int, questions_per_prompt: int, kinds, seed: int,
                    n_validation_prompts: int = 0, stated_fraction: float = 1.0, phrasings: int = 1,
                    length_matched: bool = True) -> tuple[list[dict], ...]:
    """Train and test rows over disjoint prompts, and validation rows over a third disjoint set when
    ``n_validation_prompts`` > 0 (then (train, validation, test))."""
    total = n_train_prompts + n_validation_prompts + n_test_prompts
    rows = generate_rows(total, questions_per_prompt, tuple(kinds), seed, stated_fraction=stated_fraction,
                         phrasings=phrasings, length_matched=length_matched)
    # the test prompts are the ones after the training prompts, as they always were; validation comes last
    test_ids = set(range(n_train_prompts, n_train_prompts + n_test_prompts))
    validation_ids = set(range(n_train_prompts + n_test_prompts, total))
    train = [r for r in rows if r["prompt_id"] < n_train_prompts]
    test = [r for r in rows if r["prompt_id"] in test_ids]
    if not n_validation_prompts:
        return train, test
    return train, [r for r in rows if r["prompt_id"] in validation_ids], test


def generate_splits_for(generate, seed: int) -> tuple[list[dict], ...]:
    """:func:`generate_splits` with the settings of a ``task.data.generate`` config (its dataclass or its node in a
    run's config.yaml), so that the task and anything recomputing its rows draw the same splits."""
    return generate_splits(generate.n_train_prompts, generate.n_test_prompts, generate.questions_per_prompt,
                           list(generate.kinds), seed, n_validation_prompts=generate.n_validation_prompts,
                           stated_fraction=generate.stated_fraction, phrasings=generate.phrasings,
                           length_matched=generate.length_matched)


_MOOD_OF = {word: mood for mood, words in MOOD_WORDS.items() for word in words}
# Each wording of each kind as a pattern whose one group is the asked value, compiled once.
_QUESTION_PATTERNS = [(kind, re.compile(re.escape(form).replace(re.escape("{x}"), r"(\w+)")))
                      for kind, forms in (("topic", TOPIC_QUESTIONS), ("mood", MOOD_QUESTIONS),
                                          ("city", CITY_QUESTIONS))
                      for form in forms]


def asked_fact(question: str) -> tuple[str, str] | None:
    """(kind, value) that one of ``make_question``'s questions asks about: ("topic", "music"), ("mood", "negative")
    (a mood word mapped to its mood), ("city", "Oslo"); None for a question of another form."""
    for kind, pattern in _QUESTION_PATTERNS:
        found = pattern.fullmatch(question.strip())
        if found:
            value = found.group(1)
            if kind == "mood":
                if value not in _MOOD_OF:
                    return None
                value = _MOOD_OF[value]
            return kind, value
    return None


def true_answer(text: str, question: str) -> str | None:
    """The answer ("Yes"/"No") to one of ``make_question``'s questions about a prompt made by ``make_prompt``, read
    from the text alone (what a judge does); None for a question of another form. A fact the prompt does not state
    reads as No."""
    asked = asked_fact(question)
    if asked is None:
        return None
    kind, value = asked
    holds = {"topic": lambda: any(t in text for t in TOPICS.get(value, [])),
             "mood": lambda: any(m in text for m in MOODS[value]),
             "city": lambda: f"I live in {value}." in text}[kind]()
    return "Yes" if holds else "No"
